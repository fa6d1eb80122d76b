package h2grpc

import (
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/wingman-mesh/wingman/internal/clock"
)

// pinger is the keepalive both sides run, one copy so that a fix lands once: after idle
// without a frame received it sends a PING and ends the connection when no answer comes within
// timeout. Idle counts from the last frame received, as grpc-go's keepalive does, so a peer
// that vanishes is found within idle + timeout of its last frame (a timer that restarted a
// whole idle period whenever it saw activity took up to 2 × idle + timeout: 70 s instead of
// 40 s with Istio's keepalive, found by perf/faults' half-open scenario). The timeout runs from
// before the ping is written, as grpc-go's runs from when the ping is queued: a peer that stops
// reading, so that a write holds the writer and the ping cannot even be written, is found dead
// too (expire closes the connection, which fails the blocked write).
type pinger struct {
	clk           clock.Clock
	base          time.Time // lastRead counts from here on clk
	idle, timeout time.Duration
	done          <-chan struct{} // the connection ended
	lastRead      *atomic.Int64   // when the last frame was received: nanoseconds after base, stored by the reader
	ack           <-chan struct{} // the reader: our PING was answered
	ping          func() error    // writes a PING, taking the writer
	expire        func()          // no answer within timeout: end the connection
}

func (p pinger) run() {
	prev := p.lastRead.Load()
	t := p.clk.NewTimer(p.dueAfter(prev))
	for {
		select {
		case <-p.done:
			t.Stop()
			return
		case <-t.C():
		}
		if last := p.lastRead.Load(); last != prev {
			// A frame arrived since the last look: the next ping is due idle after it.
			prev = last
			t = p.clk.NewTimer(p.dueAfter(last))
			continue
		}
		if !p.pingOnce() {
			return
		}
		prev = p.lastRead.Load() // the answer is a frame too
		t = p.clk.NewTimer(p.dueAfter(prev))
	}
}

// dueAfter is how long from now until idle has passed since a frame received at last.
func (p pinger) dueAfter(last int64) time.Duration {
	return time.Duration(last) + p.idle - p.clk.Now().Sub(p.base)
}

// pingOnce sends a PING and waits for its answer; it reports false once the connection ends,
// ended by expire when no answer came within timeout. The goroutine that runs expire is waited
// for before pingOnce returns.
func (p pinger) pingOnce() bool {
	select { // an answer to an earlier ping is no answer to this one
	case <-p.ack:
	default:
	}
	et := p.clk.NewTimer(p.timeout)
	stop := make(chan struct{})
	expired := make(chan bool, 1)
	go func() {
		select {
		case <-et.C():
			p.expire()
			expired <- true
		case <-stop:
			expired <- false
		}
	}()
	acked := false
	if p.ping() == nil {
		select {
		case <-p.done:
		case <-p.ack:
			acked = true
		}
	}
	et.Stop()
	close(stop)
	return !<-expired && acked
}

// keepalive runs the pinger on the connection until done is closed.
func (c *conn) keepalive(idle, timeout time.Duration, done <-chan struct{}, expire func()) {
	pinger{
		clk:      clock.Real,
		base:     c.start,
		idle:     idle,
		timeout:  timeout,
		done:     done,
		lastRead: &c.lastRead,
		ack:      c.pingAck,
		ping:     c.writePing,
		expire:   expire,
	}.run()
}

// frameReceived notes the time of a frame for the keepalive (monotonic, after c.start).
// Reader goroutine.
func (c *conn) frameReceived() { c.lastRead.Store(int64(time.Since(c.start))) }

// writePing sends a keepalive PING.
func (c *conn) writePing() error {
	c.lockWrite()
	if c.werr == nil {
		c.note(c.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n', 0}))
	}
	return c.unlockWrite()
}

// onPing hands a PING ACK to the keepalive and answers a PING (RFC 9113 section 6.7); it
// reports whether f was a PING, not an ACK. Reader goroutine.
func (c *conn) onPing(f *http2.PingFrame) bool {
	if f.IsAck() {
		select {
		case c.pingAck <- struct{}{}:
		default:
		}
		return false
	}
	c.lockWrite()
	if c.werr == nil {
		c.note(c.fr.WritePing(true, f.Data))
	}
	c.unlockWriteReader()
	return true
}

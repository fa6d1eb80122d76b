package h2grpc

import (
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// pinger is the keepalive both sides run, one copy so that a fix lands once: after idle
// without a frame received it sends a PING and ends the connection when no answer comes within
// timeout. The timeout runs from before the ping is written, as grpc-go's runs from when the
// ping is queued: a peer that stops reading, so that a write holds the writer and the ping
// cannot even be written, is found dead too (expire closes the connection, which fails the
// blocked write).
type pinger struct {
	idle, timeout time.Duration
	done          <-chan struct{} // the connection ended
	activity      *atomic.Bool    // set by the reader for every frame received
	ack           <-chan struct{} // the reader: our PING was answered
	ping          func() error    // writes a PING, taking the writer
	expire        func()          // no answer within timeout: end the connection
}

func (p pinger) run() {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		if p.activity.Swap(false) {
			t.Reset(p.idle)
			continue
		}
		select { // an answer to an earlier ping is no answer to this one
		case <-p.ack:
		default:
		}
		fired := make(chan struct{})
		expire := time.AfterFunc(p.timeout, func() {
			defer close(fired)
			p.expire()
		})
		acked := false
		if p.ping() == nil {
			select {
			case <-p.done:
			case <-p.ack:
				acked = true
			}
		}
		if !expire.Stop() {
			<-fired // the connection is being ended: wait for expire to return
			return
		}
		if !acked {
			return
		}
		t.Reset(p.idle)
	}
}

// keepalive runs the pinger on the connection until done is closed.
func (c *conn) keepalive(idle, timeout time.Duration, done <-chan struct{}, expire func()) {
	pinger{
		idle:     idle,
		timeout:  timeout,
		done:     done,
		activity: &c.readAny,
		ack:      c.pingAck,
		ping:     c.writePing,
		expire:   expire,
	}.run()
}

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

package h2grpc

import (
	"sync/atomic"
	"time"
)

// pinger is the keepalive both sides run, one copy so that a fix lands once: after idle
// without a frame received it sends a PING and ends the connection when no answer comes within
// timeout. Idle counts from the last frame received, as grpc-go's keepalive does, so a peer
// that vanishes is found within idle + timeout of its last frame (a timer that restarted a
// whole idle period whenever it saw activity took up to 2 × idle + timeout). The timeout runs from before the ping is written, as grpc-go's runs from when the
// ping is queued: a peer that stops reading, so that a write holds the writer and the ping
// cannot even be written, is found dead too (expire closes the connection, which fails the
// blocked write).
type pinger struct {
	idle, timeout time.Duration
	done          <-chan struct{} // the connection ended
	lastRead      *atomic.Int64   // Unix nanoseconds of the last frame received, stored by the reader
	ack           <-chan struct{} // the reader: our PING was answered
	ping          func() error    // writes a PING, taking the writer
	expire        func()          // no answer within timeout: end the connection
}

func (p pinger) run() {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	prev := p.lastRead.Load()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		if last := p.lastRead.Load(); last != prev {
			// A frame arrived since the last look: the next ping is due idle after it.
			prev = last
			t.Reset(time.Until(time.Unix(0, last).Add(p.idle)))
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

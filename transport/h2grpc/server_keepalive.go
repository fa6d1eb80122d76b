package h2grpc

import (
	"time"

	"golang.org/x/net/http2"
)

// onPing answers a client's PING and applies grpc-go's ping policy (ServerConfig.PingMinTime);
// false: too many pings, the connection ends with GOAWAY ENHANCE_YOUR_CALM. Reader goroutine.
func (sc *serverConn) onPing(data [8]byte) bool {
	sc.lockWrite()
	sc.noteWrite(sc.fr.WritePing(true, data))
	sc.unlockWrite()
	now := time.Now()
	last := sc.lastPingAt
	sc.lastPingAt = now
	if sc.sentStreamFrame.Swap(false) {
		sc.pingStrikes = 0
		return true
	}
	sc.mu.Lock()
	open := len(sc.streams)
	sc.mu.Unlock()
	open += len(sc.answered)
	minTime := sc.s.cfg.PingMinTime
	if open == 0 && !sc.s.cfg.PermitPingWithoutStream {
		minTime = pingIdleMinTime
	}
	if !last.IsZero() && last.Add(minTime).After(now) {
		sc.pingStrikes++
	}
	if sc.pingStrikes > maxPingStrikes {
		sc.lockWrite()
		sc.nc.SetWriteDeadline(time.Now().Add(time.Second))
		sc.noteWrite(sc.fr.WriteGoAway(sc.lastStream, http2.ErrCodeEnhanceYourCalm, []byte(tooManyPingsDebugMsg)))
		sc.unlockWrite()
		return false
	}
	return true
}

// ping sends a PING after KeepaliveTime without a frame received, and closes the connection
// when no answer comes within KeepaliveTimeout.
func (sc *serverConn) ping() {
	defer sc.keepalive.Done()
	idle, timeout := sc.s.cfg.KeepaliveTime, sc.s.cfg.KeepaliveTimeout
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		select {
		case <-sc.ctx.Done():
			return
		case <-t.C:
		}
		if sc.activity.Swap(false) {
			t.Reset(idle)
			continue
		}
		select {
		case <-sc.pingAck:
		default:
		}
		// The timeout runs from before the ping is written, as grpc-go's runs from when it is
		// queued: a client that stops reading, so that a write holds the writer, is found
		// dead too (closing the connection fails the blocked write).
		expire := time.AfterFunc(timeout, func() { sc.nc.Close() }) // the reader then ends the connection
		sc.lockWrite()
		sc.noteWrite(sc.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n'}))
		if sc.unlockWrite() != nil {
			expire.Stop()
			return
		}
		select {
		case <-sc.ctx.Done():
			expire.Stop()
			return
		case <-sc.pingAck:
			if !expire.Stop() {
				return
			}
			t.Reset(idle)
		}
	}
}

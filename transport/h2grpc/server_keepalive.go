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

// ping runs the keepalive (keepalive.go) until the connection ends.
func (sc *serverConn) ping() {
	defer sc.keepalive.Done()
	pinger{
		idle:     sc.s.cfg.KeepaliveTime,
		timeout:  sc.s.cfg.KeepaliveTimeout,
		done:     sc.ctx.Done(),
		lastRead: &sc.lastRead,
		ack:      sc.pingAck,
		ping: func() error {
			sc.lockWrite()
			sc.noteWrite(sc.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n'}))
			return sc.unlockWrite()
		},
		expire: func() { sc.nc.Close() }, // the reader then ends the connection
	}.run()
}

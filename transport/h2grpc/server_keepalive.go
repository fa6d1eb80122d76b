package h2grpc

import (
	"time"

	"golang.org/x/net/http2"
)

// pingPolicy applies grpc-go's ping policy (ServerConfig.PingMinTime) to a client's PING,
// answered already (onPing); false: too many pings, the connection ends with GOAWAY
// ENHANCE_YOUR_CALM. Reader goroutine.
func (sc *serverConn) pingPolicy() bool {
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
		sc.writeGoAway(sc.lastStream, http2.ErrCodeEnhanceYourCalm, []byte(tooManyPingsDebugMsg))
		return false
	}
	return true
}

// ping runs the keepalive (keepalive.go) until the connection ends.
func (sc *serverConn) ping() {
	defer sc.pinging.Done()
	sc.keepalive(sc.s.cfg.KeepaliveTime, sc.s.cfg.KeepaliveTimeout, sc.ctx.Done(),
		func() { sc.nc.Close() }) // the reader then ends the connection
}

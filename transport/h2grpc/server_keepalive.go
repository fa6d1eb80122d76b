package h2grpc

import (
	"time"
)

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
		sc.lockWrite()
		sc.noteWrite(sc.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n'}))
		sc.unlockWrite()
		t.Reset(timeout)
		select {
		case <-sc.ctx.Done():
			return
		case <-sc.pingAck:
			t.Stop()
			select {
			case <-t.C:
			default:
			}
			t.Reset(idle)
		case <-t.C:
			sc.nc.Close() // the reader then ends the connection
			return
		}
	}
}

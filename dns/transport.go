package dns

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// serveUDP reads queries from conn until it is closed. Table hits are answered inline from
// the reader's own worker; forwards run in goroutines added to wg.
func (s *Server) serveUDP(ctx context.Context, conn *net.UDPConn, wg *sync.WaitGroup) {
	w := newWorker()
	for {
		n, addr, err := conn.ReadFromUDPAddrPort(w.rbuf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("dns udp read failed", "addr", conn.LocalAddr().String(), "err", err)
			if !pause(ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		s.serveUDPPacket(ctx, w, conn, w.rbuf[:n], addr, wg)
	}
}

// serveUDPPacket answers one datagram.
func (s *Server) serveUDPPacket(ctx context.Context, w *worker, conn *net.UDPConn, pkt []byte, addr netip.AddrPort, wg *sync.WaitGroup) {
	resp, fwd := s.handle(w, pkt, false)
	if !fwd {
		if resp != nil {
			_, _ = conn.WriteToUDPAddrPort(resp, addr)
		}
		return
	}
	if !s.acquireForward() {
		_, _ = conn.WriteToUDPAddrPort(appendError(w.wbuf[:0], &w.q, rcodeServFail), addr)
		return
	}
	// The reader reuses its buffer for the next datagram: the forward gets a copy.
	req := bytes.Clone(pkt)
	q := w.q
	q.question = req[headerLen : headerLen+len(q.question)]
	q.key = nil
	wg.Go(func() {
		defer s.releaseForward()
		fw := s.getWorker()
		defer s.putWorker(fw)
		_, _ = conn.WriteToUDPAddrPort(s.forward(ctx, req, &q, false, fw.wbuf[:0]), addr)
	})
}

// serveTCP accepts connections until l is closed, each served by a goroutine added to wg.
func (s *Server) serveTCP(ctx context.Context, l *net.TCPListener, wg *sync.WaitGroup) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("dns tcp accept failed", "addr", l.Addr().String(), "err", err)
			if !pause(ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		select {
		case s.tcpConns <- struct{}{}:
		default:
			_ = c.Close() // over the bound: the client retries or gives up
			continue
		}
		wg.Go(func() {
			defer func() { <-s.tcpConns }()
			s.serveConn(ctx, c)
		})
	}
}

// serveConn answers length-prefixed queries on c in order until the client closes, idles out
// or ctx ends. A worker is held only while a query is being answered.
func (s *Server) serveConn(ctx context.Context, c *net.TCPConn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(longAgo) })
	defer stop()
	var prefix [2]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(tcpIdleTimeout))
		if _, err := io.ReadFull(c, prefix[:]); err != nil {
			return
		}
		if !s.serveTCPQuery(ctx, c, int(binary.BigEndian.Uint16(prefix[:]))) {
			return
		}
	}
}

// serveTCPQuery reads an n-byte query from c and writes the answer; false ends the connection.
func (s *Server) serveTCPQuery(ctx context.Context, c *net.TCPConn, n int) bool {
	w := s.getWorker()
	defer s.putWorker(w)
	pkt := w.rbuf[:n]
	if _, err := io.ReadFull(c, pkt); err != nil {
		return false
	}
	resp, fwd := s.handle(w, pkt, true)
	if fwd {
		if s.acquireForward() {
			resp = s.forward(ctx, pkt, &w.q, true, w.wbuf[:0])
			s.releaseForward()
		} else {
			resp = appendError(w.wbuf[:0], &w.q, rcodeServFail)
		}
	}
	if resp == nil {
		return true
	}
	w.tcp = binary.BigEndian.AppendUint16(w.tcp[:0], uint16(len(resp)))
	w.tcp = append(w.tcp, resp...)
	_ = c.SetWriteDeadline(time.Now().Add(tcpWriteTimeout))
	_, err := c.Write(w.tcp)
	return err == nil
}

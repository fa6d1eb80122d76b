package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

const (
	maxTCPConns     = 512              // concurrent TCP clients; more are closed at accept
	tcpIdleTimeout  = 10 * time.Second // between queries on a TCP connection
	tcpWriteTimeout = 5 * time.Second
	maxUDPReaders   = 4 // reader goroutines per UDP socket
)

// Server is the DNS proxy. New prepares it, Run binds and serves, UpdateNameTable feeds it.
type Server struct {
	// Immutable after New.
	cfg      Config
	log      *slog.Logger
	upstream []netip.AddrPort
	naming   naming
	fwd      *forwarder
	met      *metrics
	forwards chan struct{} // a slot per forwarded query in flight
	tcpConns chan struct{} // a slot per TCP connection
	workers  sync.Pool     // *worker, for TCP connections and forwards
	bound    chan struct{} // closed once Run has bound every listener
	done     chan struct{} // closed when Run returns

	// Atomic: the published lookup table; nil until the first NameTable. The query path
	// loads it once per query and takes no lock.
	tab atomic.Pointer[table]

	updateMu sync.Mutex // serialises UpdateNameTable builds; never taken by queries

	mu      sync.Mutex // guards the fields below
	started bool
	closed  bool
	cancel  context.CancelFunc
	addrs   []netip.AddrPort
}

// New reads resolv.conf and prepares the proxy; it binds nothing (Run does).
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("dns: listen address %q: %w", cfg.Addr, err)
	}
	rc, err := readResolvConf(cfg.ResolvConf)
	if err != nil {
		return nil, err
	}
	met := newMetrics(cfg.Registerer)
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		upstream: rc.servers,
		naming:   newNaming(cfg.Namespace, cfg.Domain, rc.search),
		fwd: &forwarder{
			servers:  rc.servers,
			timeout:  cfg.ForwardTimeout,
			parallel: cfg.ForwardParallel,
		},
		met:      met,
		forwards: make(chan struct{}, cfg.MaxConcurrentForwards),
		tcpConns: make(chan struct{}, maxTCPConns),
		bound:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.workers.New = func() any { return newWorker() }
	return s, nil
}

// Run binds the listeners and serves until ctx is done, then closes them and waits for every
// goroutine it started. It returns an error only when binding fails.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return errors.New("dns: Run called on a server that already ran or was closed")
	}
	s.started = true
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.mu.Unlock()
	defer close(s.done)
	defer cancel()

	udps, tcps, err := s.listen(ctx)
	if err != nil {
		return err
	}
	addrs := make([]netip.AddrPort, 0, len(udps))
	for _, u := range udps {
		addrs = append(addrs, u.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	s.mu.Lock()
	s.addrs = addrs
	s.mu.Unlock()
	close(s.bound)
	s.log.Info("dns proxy listening", "addrs", addrs, "upstreams", s.upstream,
		"search_shortcut", s.naming.search, "parallel", s.cfg.ForwardParallel)

	var wg sync.WaitGroup
	readers := min(runtime.GOMAXPROCS(0), maxUDPReaders)
	for _, u := range udps {
		for range readers {
			wg.Go(func() { s.serveUDP(ctx, u, &wg) })
		}
	}
	for _, l := range tcps {
		wg.Go(func() { s.serveTCP(ctx, l, &wg) })
	}
	<-ctx.Done()
	for _, u := range udps {
		_ = u.Close()
	}
	for _, l := range tcps {
		_ = l.Close()
	}
	wg.Wait()
	return nil
}

// Close stops a running server and waits until Run has returned; a server never run just
// refuses to run afterwards.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	cancel, started := s.cancel, s.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	cancel()
	<-s.done
	return nil
}

// Bound is closed once Run has bound its listeners.
func (s *Server) Bound() <-chan struct{} { return s.bound }

// Addrs returns the bound addresses (UDP and TCP share each), valid once Bound is closed.
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.addrs...)
}

// Ready reports whether a NameTable has arrived (the readiness probe waits for it).
func (s *Server) Ready() bool { return s.tab.Load() != nil }

// UpdateNameTable decodes a serialized istio.networking.nds.v1.NameTable (the Any.value of
// an NDS response), builds the lookup table and publishes it atomically. A table that does
// not decode returns an error (to be NACKed) and the last good table stays in use. Calls
// are expected in push order; concurrent calls are serialised.
func (s *Server) UpdateNameTable(raw []byte) error {
	nt := &ndspb.NameTable{}
	if err := nt.UnmarshalVT(raw); err != nil {
		return fmt.Errorf("dns: decode NameTable (%d bytes): %w", len(raw), err)
	}
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	t := buildTable(nt, s.naming)
	s.tab.Store(t)
	s.log.Debug("dns name table updated", "hosts", len(nt.GetTable()), "names", len(t.names),
		"skipped", t.skipped)
	return nil
}

// handle answers the query in pkt using w. It returns the reply to send (nil: send nothing),
// or fwd when the query must go upstream (w.q then describes it).
func (s *Server) handle(w *worker, pkt []byte, tcp bool) (resp []byte, fwd bool) {
	s.met.requests.Inc()
	q := &w.q
	switch parseQuery(pkt, q, w.key) {
	case verdictDrop:
		return nil, false
	case verdictFormErr:
		if q.question != nil {
			return appendError(w.wbuf[:0], q, rcodeFormErr), false
		}
		return appendHeaderOnly(w.wbuf[:0], q, rcodeFormErr), false
	case verdictNotImp:
		return appendHeaderOnly(w.wbuf[:0], q, rcodeNotImp), false
	}
	if q.edns && q.ednsVersion != 0 {
		return appendError(w.wbuf[:0], q, extRcodeBadVers<<4), false
	}
	t := s.tab.Load()
	if t == nil {
		if s.cfg.RespondBeforeSync {
			return nil, true
		}
		return appendError(w.wbuf[:0], q, rcodeServFail), false
	}
	if q.plain && q.qclass == classINET && (q.qtype == typeA || q.qtype == typeAAAA) {
		if e := t.lookup(q.key, w.wild); e != nil {
			limit := maxMsgSize
			if !tcp {
				limit = udpLimit(q)
			}
			return w.appendTableAnswer(w.wbuf[:0], q, e, t.searchWire, limit), false
		}
	}
	return nil, true
}

// forward sends req upstream and appends the reply for the client to dst: the upstream's
// reply cut to the client's size, or SERVFAIL when no upstream gave a usable one.
func (s *Server) forward(ctx context.Context, req []byte, q *query, tcp bool, dst []byte) []byte {
	s.met.upstreamRequests.Inc()
	start := time.Now()
	r := s.fwd.exchange(ctx, req, q, tcp)
	s.met.upstreamDuration.Observe(time.Since(start).Seconds())
	if r.err != nil {
		s.met.upstreamFailures.Inc()
		s.log.Debug("dns forward failed", "name", string(q.key), "type", q.qtype, "err", r.err)
		return appendError(dst, q, rcodeServFail)
	}
	defer s.fwd.putBuf(r.buf)
	limit := maxMsgSize
	if !tcp {
		limit = udpLimit(q)
	}
	return fitReply(dst, r.resp, q, limit)
}

// acquireForward takes a forward slot without waiting; false means the bound is reached and
// the query is answered SERVFAIL (push back rather than queue).
func (s *Server) acquireForward() bool {
	select {
	case s.forwards <- struct{}{}:
		return true
	default:
		s.met.upstreamFailures.Inc()
		return false
	}
}

func (s *Server) releaseForward() { <-s.forwards }

func (s *Server) getWorker() *worker  { return s.workers.Get().(*worker) }
func (s *Server) putWorker(w *worker) { s.workers.Put(w) }

// listen binds UDP and TCP on every listen address. With port 0 one free port is shared by
// all of them; a clash on it (another process took it for TCP) is retried on a new port.
func (s *Server) listen(ctx context.Context) ([]*net.UDPConn, []*net.TCPListener, error) {
	host, port, _ := net.SplitHostPort(s.cfg.Addr)
	hosts := []string{host}
	if host == "localhost" {
		hosts = localhostIPs(s.upstream)
	}
	for attempt := 0; ; attempt++ {
		udps, tcps, err := bindAll(ctx, hosts, port)
		if err == nil || port != "0" || attempt == 8 || !errors.Is(err, syscall.EADDRINUSE) {
			return udps, tcps, err
		}
	}
}

// localhostIPs is what "localhost" binds, as in Istio: 127.0.0.1 for IPv4 nameservers,
// ::1 for IPv6 ones, 127.0.0.1 when there is none.
func localhostIPs(servers []netip.AddrPort) []string {
	var v4, v6 bool
	for _, s := range servers {
		if s.Addr().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	var out []string
	if v4 || !v6 {
		out = append(out, "127.0.0.1")
	}
	if v6 {
		out = append(out, "::1")
	}
	return out
}

func bindAll(ctx context.Context, hosts []string, port string) (udps []*net.UDPConn, tcps []*net.TCPListener, err error) {
	defer func() {
		if err != nil {
			for _, u := range udps {
				_ = u.Close()
			}
			for _, l := range tcps {
				_ = l.Close()
			}
			udps, tcps = nil, nil
		}
	}()
	var lc net.ListenConfig
	for _, h := range hosts {
		addr := net.JoinHostPort(h, port)
		pc, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			return udps, tcps, fmt.Errorf("dns: listen udp %s: %w", addr, err)
		}
		u := pc.(*net.UDPConn)
		udps = append(udps, u)
		if port == "0" {
			port = strconv.Itoa(u.LocalAddr().(*net.UDPAddr).Port)
			addr = net.JoinHostPort(h, port)
		}
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return udps, tcps, fmt.Errorf("dns: listen tcp %s: %w", addr, err)
		}
		tcps = append(tcps, ln.(*net.TCPListener))
	}
	return udps, tcps, nil
}

// pause waits d or until ctx is done; false when ctx is done. It slows loops on persistent
// socket errors.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

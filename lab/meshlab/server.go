package meshlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/lab/controlplane"
	"github.com/wingman-mesh/wingman/lab/testca"
)

// Server is meshlab: the Istiod stand-in of lab/controlplane (xDS and the CA behind one gRPC
// port), fed from a watched folder.
type Server struct {
	cfg     Config               // immutable after New
	token   string               // immutable after New
	bundle  []byte               // immutable after New: serving root + CA root
	ca      *testca.CA           // safe for concurrent use
	cp      *controlplane.Server // immutable after New; safe for concurrent use
	metrics *metrics             // immutable after New

	loadMu  sync.Mutex // serialises loads; guards version and current
	version uint64     // guarded by loadMu
	current *Set       // guarded by loadMu

	nodesMu sync.Mutex       // guards nodes
	nodes   map[int64]string // guarded by nodesMu: stream id → node id
}

// New builds the CA and the caches, loads the resources folder (a bad folder is an error at
// start: there is no last good set to keep serving yet) and writes the agent's files.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if cfg.ResourcesDir == "" {
		return nil, errors.New("meshlab: ResourcesDir is required")
	}
	s := &Server{cfg: cfg, token: cfg.Token, nodes: map[int64]string{}}
	if s.token == "" {
		t, err := randomToken()
		if err != nil {
			return nil, err
		}
		s.token = t
	}
	var err error
	s.ca, err = testca.New(testca.Config{Token: s.token, TTL: cfg.CertTTL, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("meshlab: CA: %w", err)
	}
	types := make([]string, len(kinds))
	for i, k := range kinds {
		types[i] = k.typeURL
	}
	partitions := make([]string, len(audiences))
	for i, a := range audiences {
		partitions[i] = string(a)
	}
	s.cp, err = controlplane.New(controlplane.Config{Token: s.token, Types: types, Partitions: partitions,
		Partition: func(n *core.Node) string { return string(audienceOf(n)) },
		CA:        s.ca, Callbacks: s.callbacks(), Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("meshlab: %w", err)
	}
	s.bundle = append(s.cp.RootPEM(), s.ca.RootPEM()...)
	if s.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if res := s.Reload(); res.Err != nil {
		return nil, res.Err
	}
	if cfg.OutputDir != "" {
		if err := writeAgentFiles(cfg.OutputDir, s.bundle, s.token); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Token is the bearer token callers must present.
func (s *Server) Token() string { return s.token }

// RootBundlePEM is what the agent trusts for Istiod and the CA (root-cert.pem): meshlab's
// serving root, then the CA's signing root, the mesh root of the workload certificates.
func (s *Server) RootBundlePEM() []byte { return append([]byte(nil), s.bundle...) }

// CA is the certificate authority (tests and the demo change its mode or count its requests).
func (s *Server) CA() *testca.CA { return s.ca }

// Version is the version of the resources being served.
func (s *Server) Version() uint64 {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	return s.version
}

// Reload reads the resources folder now. A good set replaces the served one (only resources
// that changed are pushed); a bad one is rejected and the last good set keeps being served.
func (s *Server) Reload() LoadResult {
	s.loadMu.Lock()
	set, err := LoadDir(s.cfg.ResourcesDir)
	var res LoadResult
	if err != nil {
		res = LoadResult{Version: s.version, Err: err}
		if s.current != nil {
			res.Counts = s.current.Counts()
		}
	} else {
		s.apply(set)
		s.version++
		s.current = set
		res = LoadResult{Version: s.version, Counts: set.Counts()}
	}
	s.loadMu.Unlock()
	log := s.cfg.Logger
	switch {
	case res.Err != nil && res.Version == 0:
		log.Error("meshlab: resources rejected", "dir", s.cfg.ResourcesDir, "err", res.Err)
	case res.Err != nil:
		log.Error("meshlab: resources rejected; still serving the last good set",
			"dir", s.cfg.ResourcesDir, "err", res.Err, "version", res.Version, "serving", res.Counts)
	default:
		log.Info("meshlab: resources loaded", "dir", s.cfg.ResourcesDir, "version", res.Version,
			"files", set.Files(), "resources", res.Counts)
	}
	s.metrics.load(res.Err == nil)
	if s.cfg.OnLoad != nil {
		s.cfg.OnLoad(res)
	}
	return res
}

// audienceOf is the audience of a client: gRPC when its node says GENERATOR=grpc, as Istio's
// gRPC bootstrap does.
func audienceOf(n *core.Node) Audience {
	if n.GetMetadata().GetFields()["GENERATOR"].GetStringValue() == "grpc" {
		return GRPC
	}
	return Envoy
}

// apply hands the caches what changed from what they hold. Called with loadMu held.
func (s *Server) apply(set *Set) {
	for _, a := range audiences {
		for _, k := range kinds {
			s.applyOne(s.cp.PartitionCache(string(a), k.typeURL), set.Resources(a, k.typeURL), k.typeURL)
		}
	}
}

func (s *Server) applyOne(c *cachev3.LinearCache, next map[string]proto.Message, typeURL string) {
	old := c.GetResources()
	upd := map[string]types.Resource{}
	var del []string
	for name, m := range next {
		if o, ok := old[name]; !ok || !proto.Equal(o, m) {
			upd[name] = m
		}
	}
	for name := range old {
		if _, ok := next[name]; !ok {
			del = append(del, name)
		}
	}
	if len(upd) > 0 || len(del) > 0 {
		if err := c.UpdateResources(upd, del); err != nil {
			s.cfg.Logger.Error("meshlab: cache update", "type", typeURL, "err", err)
		}
	}
}

// Serve serves xDS and the CA on lis and watches the resources folder until ctx is done, then
// stops the server and returns nil. lis is closed on return. Call it once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	watchErr := make(chan error, 1)
	wg.Go(func() { watchErr <- s.watch(ctx) })
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- s.cp.Serve(ctx, lis) })
	s.cfg.Logger.Info("meshlab: serving xDS and CA", "addr", lis.Addr().String(), "resources", s.cfg.ResourcesDir)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("meshlab: %w", err)
		serveErr <- nil
	case err = <-watchErr:
		watchErr <- nil
	}
	cancel()
	wg.Wait()
	return err
}

// callbacks log streams and NACKs and report pushes.
func (s *Server) callbacks() serverv3.CallbackFuncs {
	setNode := func(id int64, n *core.Node) {
		if n.GetId() == "" {
			return
		}
		s.nodesMu.Lock()
		if _, ok := s.nodes[id]; !ok {
			s.cfg.Logger.Info("meshlab: xDS stream opened", "stream", id, "node", n.GetId())
		}
		s.nodes[id] = n.GetId()
		s.nodesMu.Unlock()
	}
	closed := func(id int64, _ *core.Node) {
		s.nodesMu.Lock()
		node := s.nodes[id]
		delete(s.nodes, id)
		s.nodesMu.Unlock()
		s.cfg.Logger.Debug("meshlab: xDS stream closed", "stream", id, "node", node)
	}
	nodeOf := func(id int64) string {
		s.nodesMu.Lock()
		defer s.nodesMu.Unlock()
		return s.nodes[id]
	}
	nack := func(id int64, typeURL string, detail interface{ GetMessage() string }) {
		s.cfg.Logger.Warn("meshlab: client rejected a response (NACK)", "node", nodeOf(id), "type", typeURL, "detail", detail.GetMessage())
	}
	push := func(id int64, typeURL string, n int, delta bool) {
		s.metrics.push(typeURL)
		if s.cfg.OnPush != nil {
			s.cfg.OnPush(Push{TypeURL: typeURL, Node: nodeOf(id), Resources: n, Delta: delta})
		}
	}
	return serverv3.CallbackFuncs{
		StreamClosedFunc:      closed,
		DeltaStreamClosedFunc: closed,
		StreamRequestFunc: func(id int64, r *discovery.DiscoveryRequest) error {
			setNode(id, r.GetNode())
			if r.GetErrorDetail() != nil {
				nack(id, r.GetTypeUrl(), r.GetErrorDetail())
			}
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, r *discovery.DeltaDiscoveryRequest) error {
			setNode(id, r.GetNode())
			if r.GetErrorDetail() != nil {
				nack(id, r.GetTypeUrl(), r.GetErrorDetail())
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discovery.DiscoveryRequest, r *discovery.DiscoveryResponse) {
			push(id, r.GetTypeUrl(), len(r.GetResources()), false)
		},
		StreamDeltaResponseFunc: func(id int64, _ *discovery.DeltaDiscoveryRequest, r *discovery.DeltaDiscoveryResponse) {
			push(id, r.GetTypeUrl(), len(r.GetResources()), true)
		},
	}
}

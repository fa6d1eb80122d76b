package laststate

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/lab/controlplane"
	"github.com/wingman-mesh/wingman/mux"
)

const token = "laststate-token"

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// clustersOf builds n clusters of about size bytes in all, tagged with gen in their EDS service
// name (so a client can tell which push a cluster came from).
func clustersOf(n, size, gen int) map[string]types.Resource {
	filler := strings.Repeat("x", max(size/n-40, 1))
	out := map[string]types.Resource{}
	for k := range n {
		name := fmt.Sprintf("outbound|80||svc-%04d.ns.svc.cluster.local", k)
		out[name] = &cluster.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: "g" + strconv.Itoa(gen) + "-" + filler}}
	}
	return out
}

// genOf is the push a cluster came from (0 when unreadable).
func genOf(a *anypb.Any) int {
	var c cluster.Cluster
	if a.UnmarshalTo(&c) != nil {
		return 0
	}
	g, _, _ := strings.Cut(strings.TrimPrefix(c.GetEdsClusterConfig().GetServiceName(), "g"), "-")
	n, _ := strconv.Atoi(g)
	return n
}

// world is Istiod (lab/controlplane: go-control-plane's xDS server behind TLS and a token) and
// a workload certificate from lab/testca, with the files the proxy needs.
type world struct {
	cp        *controlplane.Server
	addr      string
	root, tok string
	certs     Certs
	// agentTypes, when set, gives each run's proxy the agent's own subscriptions.
	agentTypes func(rec *Recorder) map[string]mux.Handler
}

// newWorld serves clusters, listeners and the extra types.
func newWorld(t *testing.T, extra ...string) *world {
	cp, err := controlplane.New(controlplane.Config{Token: token, Types: append([]string{fastpath.ClusterType, fastpath.ListenerType}, extra...), VersionPrefixes: true})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{cp: cp, certs: workloadCerts(t, newCA(t), testID)}
	if err := cp.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Stop() })
	w.addr = cp.Addr()
	d := t.TempDir()
	w.root, w.tok = filepath.Join(d, "root.pem"), filepath.Join(d, "token")
	if err := os.WriteFile(w.root, cp.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.tok, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// run is one life of the agent's proxy and recorder; stop ends both and waits.
type run struct {
	rec  *Recorder
	sock string
	reg  *metric.Registry
	stop func()
}

func (w *world) start(t *testing.T, dir string, src func(reg *metric.Registry) mux.Restorer, seed *Snapshot) *run {
	t.Helper()
	reg := metric.NewRegistry()
	rec, err := NewRecorder(RecorderConfig{Dir: dir, Identity: testID, Registry: reg, Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)), Certs: func() (Certs, bool) { return w.certs, true }})
	if err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		if err := rec.Seed(seed); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "XDS")
	cfg := mux.Config{SocketPath: sock, Recorder: rec, Registerer: reg,
		Upstream: mux.UpstreamConfig{Address: w.addr, RootCAFile: w.root, ServerName: controlplane.ServerName, TokenFile: w.tok},
		Backoff:  mux.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond}}
	if src != nil {
		cfg.Restore = src(reg)
	}
	if w.agentTypes != nil {
		cfg.AgentTypes = w.agentTypes(rec)
	}
	p, err := mux.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := mux.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	perr, rerr := make(chan error, 1), make(chan error, 1)
	go func() { perr <- p.Serve(ctx, l) }()
	go func() { rerr <- rec.Run(ctx) }()
	r := &run{rec: rec, sock: sock, reg: reg}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-perr; err != nil {
			t.Errorf("proxy: %v", err)
		}
		<-rerr
	}
	t.Cleanup(r.stop)
	return r
}

// waitSnapshot waits until the snapshot in dir satisfies ok.
func waitSnapshot(ctx context.Context, t *testing.T, r *run, dir string, ok func(*Snapshot) bool) *Snapshot {
	t.Helper()
	for {
		_, next := r.rec.Written()
		if s, err := Load(dir, 0); err == nil {
			s.Close()
			if ok(s) {
				return s
			}
		}
		select {
		case <-next:
		case <-ctx.Done():
			s, err := Load(dir, 0)
			t.Fatalf("snapshot never as wanted; last: %v %v", err, s)
		}
	}
}

func versions(s *Snapshot, delta bool) map[string]string {
	out := map[string]string{}
	for _, st := range s.Streams {
		if st.Delta != delta {
			continue
		}
		for _, r := range st.Responses {
			out[r.TypeURL] = r.Version
		}
	}
	return out
}

// client is Envoy's side of one ADS stream (SotW or Delta) through the proxy: it subscribes,
// ACKs every response and keeps what it holds.
type client struct {
	t     *testing.T
	delta bool
	sotw  discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	dstr  discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node  *core.Node
	first bool
}

type got struct {
	typeURL, version string
	gens             []int // the push each cluster in the response came from
	n                int
	removed          []string
	names            []string
}

func dial(t *testing.T, ctx context.Context, sock string, delta bool) *client {
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := &client{t: t, delta: delta, node: &core.Node{Id: testID.NodeID}, first: true}
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)
	if delta {
		c.dstr, err = ads.DeltaAggregatedResources(ctx)
	} else {
		c.sotw, err = ads.StreamAggregatedResources(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *client) subscribe(typeURL string) {
	var node *core.Node
	if c.first {
		node, c.first = c.node, false
	}
	var err error
	if c.delta {
		err = c.dstr.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL})
	} else {
		err = c.sotw.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typeURL})
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// recvDelta takes the next Delta response without answering it; ack answers it later.
func (c *client) recvDelta() (got, string) {
	c.t.Helper()
	r, err := c.dstr.Recv()
	if err != nil {
		c.t.Fatalf("client stream reset: %v", err)
	}
	g := got{typeURL: r.TypeUrl, version: r.SystemVersionInfo, n: len(r.Resources), removed: r.RemovedResources}
	for _, res := range r.Resources {
		g.gens = append(g.gens, genOf(res.Resource))
		g.names = append(g.names, res.Name)
	}
	return g, r.Nonce
}

func (c *client) ack(typeURL, nonce string) {
	if err := c.dstr.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: nonce}); err != nil {
		c.t.Fatal(err)
	}
}

// recv takes the next response and ACKs it. An error is an Envoy stream reset.
func (c *client) recv() (got, error) {
	var g got
	if c.delta {
		r, err := c.dstr.Recv()
		if err != nil {
			return g, err
		}
		g = got{typeURL: r.TypeUrl, version: r.SystemVersionInfo, n: len(r.Resources), removed: r.RemovedResources}
		for _, res := range r.Resources {
			g.gens = append(g.gens, genOf(res.Resource))
			g.names = append(g.names, res.Name)
		}
		return g, c.dstr.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
	}
	r, err := c.sotw.Recv()
	if err != nil {
		return g, err
	}
	g = got{typeURL: r.TypeUrl, version: r.VersionInfo, n: len(r.Resources)}
	for _, res := range r.Resources {
		g.gens = append(g.gens, genOf(res))
		var c cluster.Cluster
		if res.UnmarshalTo(&c) == nil {
			g.names = append(g.names, c.Name)
		}
	}
	return g, c.sotw.Send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
}

func (c *client) mustRecv(typeURL string) got {
	c.t.Helper()
	g, err := c.recv()
	if err != nil {
		c.t.Fatalf("client stream reset: %v", err)
	}
	if g.typeURL != typeURL {
		c.t.Fatalf("got a %s response, want %s", g.typeURL, typeURL)
	}
	return g
}

// TestRestoreHandsOverWithoutReset: run 1 records what the client ACKed (a 300 KB CDS push goes
// cut-through, piece by piece, into the spool); Istiod goes away and the agent restarts; run 2
// serves the snapshot's responses to a new client while Istiod is down, and when Istiod comes
// back with a newer push, hands over on the same stream: no reset, nothing older than the
// snapshot, the snapshot rewritten from the live state. Expected values: versions are
// go-control-plane LinearCache's with VersionPrefixes (cds-1 after the first SetResources, each
// SetResources one more); the cluster generation is the one the test put in the push.
func TestRestoreHandsOverWithoutReset(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) { testHandover(t, delta) })
	}
}

func testHandover(t *testing.T, delta bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := shmDir(t)
	w := newWorld(t)
	w.cp.Cache(fastpath.ClusterType).SetResources(clustersOf(200, 300<<10, 1))
	w.cp.Cache(fastpath.ListenerType).SetResources(map[string]types.Resource{"l1": &listener.Listener{Name: "l1"}, "l2": &listener.Listener{Name: "l2"}})

	// Run 1: live Istiod; the client's ACKs make the snapshot.
	r1 := w.start(t, dir, nil, nil)
	c1 := dial(t, ctx, r1.sock, delta)
	c1.subscribe(fastpath.ClusterType)
	if g := c1.mustRecv(fastpath.ClusterType); g.version != "cds-1" || g.n != 200 {
		t.Fatalf("run 1 CDS: %+v", g)
	}
	c1.subscribe(fastpath.ListenerType)
	c1.mustRecv(fastpath.ListenerType)
	// A second push: for Delta the snapshot then holds two CDS responses, applied in order.
	w.cp.Cache(fastpath.ClusterType).SetResources(clustersOf(200, 300<<10, 2))
	if g := c1.mustRecv(fastpath.ClusterType); g.version != "cds-2" {
		t.Fatalf("run 1 second CDS: %+v", g)
	}
	waitSnapshot(ctx, t, r1, dir, func(s *Snapshot) bool {
		v := versions(s, delta)
		return v[fastpath.ClusterType] == "cds-2" && v[fastpath.ListenerType] == "lds-1"
	})
	if st, err := os.Stat(filepath.Join(dir, FileName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v %v", st, err)
	}
	r1.stop()

	// Istiod goes away; the agent starts again from the snapshot.
	w.cp.Stop()
	snap, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	if err := snap.Check(testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	var src *Source
	r2 := w.start(t, dir, func(reg *metric.Registry) mux.Restorer {
		src = NewSource(snap, reg, nil)
		return src
	}, snap)
	if v, _ := r2.reg.Value("wingman_last_state_serving_restored"); v != 1 {
		t.Fatalf("serving_restored = %v before Istiod is back, want 1", v)
	}
	c2 := dial(t, ctx, r2.sock, delta)
	c2.subscribe(fastpath.ClusterType)
	// The restored CDS response is the snapshot's newest state whole (Delta: the two accepted
	// responses merged when the snapshot was written), read from the file as it is sent: never
	// an older state on the way.
	held := map[string]int{}
	apply := func(g got) {
		if !delta {
			clear(held)
		}
		for i, n := range g.names {
			held[n] = g.gens[i]
		}
		for _, n := range g.removed {
			delete(held, n)
		}
	}
	var served []string
	for {
		g := c2.mustRecv(fastpath.ClusterType)
		served = append(served, g.version)
		apply(g)
		if g.version == "cds-2" {
			break
		}
	}
	if !slices.Equal(served, []string{"cds-2"}) || len(held) != 200 {
		t.Fatalf("restored CDS: versions %v, %d clusters held; want one response, cds-2, of 200", served, len(held))
	}
	for n, gen := range held {
		if gen != 2 {
			t.Fatalf("restored CDS: the client holds %s of push %d, want 2", n, gen)
		}
	}
	c2.subscribe(fastpath.ListenerType)
	if g := c2.mustRecv(fastpath.ListenerType); g.version != "lds-1" || g.n != 2 {
		t.Fatalf("restored LDS: %+v", g)
	}

	// Istiod comes back with a newer push, one cluster fewer: it reaches the client on the same
	// stream, and the client ends up holding exactly Istiod's clusters (for Delta, the removal
	// comes from Istiod learning what the client holds: the replay's initial versions).
	next := clustersOf(200, 300<<10, 3)
	delete(next, "outbound|80||svc-0000.ns.svc.cluster.local")
	w.cp.Cache(fastpath.ClusterType).SetResources(next)
	if err := w.cp.Start(w.addr); err != nil {
		t.Fatal(err)
	}
	for {
		g, err := c2.recv()
		if err != nil {
			t.Fatalf("client stream reset at hand-over: %v", err)
		}
		if g.typeURL != fastpath.ClusterType {
			continue
		}
		for _, gen := range g.gens {
			if gen < 2 {
				t.Fatalf("a cluster older than the snapshot reached the client: %+v", g)
			}
		}
		apply(g)
		if g.version == "cds-3" {
			break
		}
	}
	if len(held) != 199 {
		t.Fatalf("after hand-over the client holds %d clusters, want Istiod's 199", len(held))
	}
	for n, gen := range held {
		if gen != 3 {
			t.Fatalf("after hand-over the client holds %s of push %d, want 3", n, gen)
		}
	}
	if v, _ := r2.reg.Value("wingman_last_state_serving_restored"); v != 0 {
		t.Fatalf("serving_restored = %v after Istiod is back, want 0", v)
	}
	waitSnapshot(ctx, t, r2, dir, func(s *Snapshot) bool {
		v := versions(s, delta)
		return v[fastpath.ClusterType] == "cds-3" && v[fastpath.ListenerType] == "lds-1"
	})
}

// TestRestoreDeltaAckWindow: Istiod comes back while a restored Delta response has reached the
// client and the client has not ACKed it yet (a slow Envoy applying a large configuration).
// Istiod dropped a cluster meanwhile: its first response must remove it, so the proxy's replay
// must name what the client was sent, not only what it ACKed. With a replay of the ACKed
// versions only (the behaviour before), the replay names nothing and go-control-plane's
// LinearCache (lab/controlplane), like Istiod, removes only names it knows the client has
// (go-control-plane pkg/cache/v3/delta.go createDeltaResponse: wildcard removals are the
// subscription's returned names it no longer has; Istio 1.30.3 pilot/pkg/xds/delta.go
// deltaWatchedResources takes initial_resource_versions as watched names): the dropped cluster
// would stay at the client until its next reconnect.
func TestRestoreDeltaAckWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := shmDir(t)
	w := newWorld(t)
	w.cp.Cache(fastpath.ClusterType).SetResources(clustersOf(20, 40<<10, 1))
	r1 := w.start(t, dir, nil, nil)
	c1 := dial(t, ctx, r1.sock, true)
	c1.subscribe(fastpath.ClusterType)
	c1.mustRecv(fastpath.ClusterType)
	waitSnapshot(ctx, t, r1, dir, func(s *Snapshot) bool { return versions(s, true)[fastpath.ClusterType] == "cds-1" })
	r1.stop()

	w.cp.Stop()
	snap, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	if err := snap.Check(testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	r2 := w.start(t, dir, func(reg *metric.Registry) mux.Restorer { return NewSource(snap, reg, nil) }, snap)
	c2 := dial(t, ctx, r2.sock, true)
	c2.subscribe(fastpath.ClusterType)
	held := map[string]int{}
	apply := func(g got) {
		for i, n := range g.names {
			held[n] = g.gens[i]
		}
		for _, n := range g.removed {
			delete(held, n)
		}
	}
	g, restoredNonce := c2.recvDelta() // the restored response, not answered yet
	if g.version != "cds-1" || g.n != 20 {
		t.Fatalf("restored CDS: %+v", g)
	}
	apply(g)

	const dropped = "outbound|80||svc-0000.ns.svc.cluster.local"
	next := clustersOf(20, 40<<10, 2)
	delete(next, dropped)
	w.cp.Cache(fastpath.ClusterType).SetResources(next)
	if err := w.cp.Start(w.addr); err != nil {
		t.Fatal(err)
	}
	// Istiod's first response comes after the proxy's replay on the new upstream stream.
	g, nonce := c2.recvDelta()
	if g.typeURL != fastpath.ClusterType || g.version != "cds-2" {
		t.Fatalf("Istiod's first response: %+v", g)
	}
	apply(g)
	c2.ack(fastpath.ClusterType, restoredNonce)
	c2.ack(fastpath.ClusterType, nonce)
	if _, ok := held[dropped]; ok || len(held) != 19 {
		t.Fatalf("after Istiod's first response the client holds %d clusters (the dropped one: %v), want Istiod's 19; removed %v", len(held), ok, g.removed)
	}
	for n, gen := range held {
		if gen != 2 {
			t.Fatalf("the client holds %s of push %d, want 2", n, gen)
		}
	}
}

// TestSourceServesDeltaLogInOrder: a Delta type stored as several accepted responses is served
// as they were recorded, in the order the client applied them, each read from the snapshot file
// when sent (nothing is merged in memory); the file stays open while a response handed out is
// not released, even once Istiod is reached, and nothing more is handed out then.
func TestSourceServesDeltaLogInOrder(t *testing.T) {
	dir := shmDir(t)
	res := func(name, version string) *discovery.Resource {
		a, _ := anypb.New(&cluster.Cluster{Name: name})
		return &discovery.Resource{Name: name, Version: version, Resource: a}
	}
	marshal := func(m *discovery.DeltaDiscoveryResponse) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, SystemVersionInfo: "cds-1", Nonce: "1",
		Resources: []*discovery.Resource{res("a", "1"), res("b", "1")}})
	second := marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, SystemVersionInfo: "cds-2", Nonce: "2",
		Resources: []*discovery.Resource{res("c", "2")}, RemovedResources: []string{"a"}})
	snap := sample(t, workloadCerts(t, newCA(t), testID))
	snap.Streams = []Stream{{Delta: true, NodeID: testID.NodeID, Responses: []Response{
		{TypeURL: fastpath.ClusterType, Version: "cds-1", Data: first}, {TypeURL: fastpath.ClusterType, Version: "cds-2", Data: second}}}}
	if err := os.WriteFile(filepath.Join(dir, FileName), encode(t, snap), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Check(testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	src := NewSource(loaded, metric.NewRegistry(), nil)
	out := src.Responses(true, testID.NodeID, fastpath.ClusterType)
	if len(out) != 2 || out[0].Size() != len(first) || out[1].Size() != len(second) {
		t.Fatalf("%d responses served, want the two recorded, in order", len(out))
	}
	src.Live() // out[1] is still to be read: the file stays open
	if got := readAll(t, out[:1]); string(got[0]) != string(first) {
		t.Fatal("first response not as recorded")
	}
	if got := readAll(t, out[1:]); string(got[0]) != string(second) {
		t.Fatal("second response not as recorded")
	}
	if loaded.file != nil {
		t.Fatal("snapshot file still open once live and every response released")
	}
	if out := src.Responses(true, testID.NodeID, fastpath.ClusterType); out != nil {
		t.Fatal("served after Istiod was reached")
	}
}

package perf

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/lab/controlplane"
	"github.com/wingman-mesh/wingman/lab/testca"
)

// Type URLs the control plane serves.
const (
	ClusterType  = resourcev3.ClusterType
	ListenerType = resourcev3.ListenerType
	// IstiodName is the name in the control plane's serving certificate.
	IstiodName = controlplane.ServerName
	// Token is the bearer token the control plane and the CA require.
	Token = "perf-token"
)

// ControlPlane is lab/controlplane, the Istiod stand-in (go-control-plane's server over
// LinearCaches, and the CA, on one TLS port with a token check), plus a plaintext xDS port for
// direct measurements, and the versions of what the harness pushed.
type ControlPlane struct {
	CA      *testca.CA
	RootPEM []byte // verifies the TLS port

	srv     *controlplane.Server // safe for concurrent use
	ctx     context.Context      // immutable: the server's lifetime
	pushMu  sync.Mutex           // serialises Push; guards version
	version map[string]uint64    // per type: the LinearCache's version counter
	plainL  net.Listener         // plaintext listener
	pstop   context.CancelFunc   // ends the plaintext server
	pdone   chan error           // receives the plaintext server's result
}

// ControlPlaneConfig configures StartControlPlane.
type ControlPlaneConfig struct {
	// CertTTL is the most the CA signs for (short for rotation scenarios; default 24h).
	CertTTL time.Duration
}

// StartControlPlane starts both ports on loopback; ctx bounds a Restart, Close stops it.
func StartControlPlane(ctx context.Context, cfg ControlPlaneConfig) (*ControlPlane, error) {
	ca, err := testca.New(testca.Config{Token: Token, TTL: cfg.CertTTL})
	if err != nil {
		return nil, fmt.Errorf("control plane: CA: %w", err)
	}
	// Versions name their type (cds-3), so a version an Envoy stand-in reports is unambiguous.
	srv, err := controlplane.New(controlplane.Config{Token: Token, Types: []string{ClusterType, ListenerType},
		VersionPrefixes: true, CA: ca})
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	cp := &ControlPlane{CA: ca, RootPEM: srv.RootPEM(), srv: srv, ctx: ctx, version: map[string]uint64{}}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cp.Close()
		return nil, fmt.Errorf("control plane: plaintext listen: %w", err)
	}
	pctx, pstop := context.WithCancel(context.Background())
	cp.plainL, cp.pstop, cp.pdone = l, pstop, make(chan error, 1)
	go func() { cp.pdone <- srv.ServePlaintext(pctx, l) }()
	return cp, nil
}

// Addr is the TLS host:port (xDS and CA).
func (cp *ControlPlane) Addr() string { return cp.srv.Addr() }

// PlainAddr is the plaintext xDS host:port used for direct measurements.
func (cp *ControlPlane) PlainAddr() string { return cp.plainL.Addr().String() }

// Accepted is how many TLS connections the control plane has accepted (upstream connections
// opened by agents, CA connections included).
func (cp *ControlPlane) Accepted() int64 { return cp.srv.Accepted() }

// Restart stops the TLS server (closing every agent's stream), waits pause, and serves again on
// the same port, as an Istiod restart behind a stable address.
func (cp *ControlPlane) Restart(pause time.Duration) error {
	return cp.srv.Restart(cp.ctx, pause)
}

// Close stops both servers and waits for them.
func (cp *ControlPlane) Close() {
	_ = cp.srv.Stop()
	if cp.pstop != nil {
		cp.pstop()
		<-cp.pdone
	}
}

// Push replaces the resources of type typ and returns the version the cache will send and the
// time the update was made (the start of push latency).
func (cp *ControlPlane) Push(typ string, res map[string]types.Resource) (string, time.Time, error) {
	c := cp.srv.Cache(typ)
	if c == nil {
		return "", time.Time{}, fmt.Errorf("control plane: no cache for type %s", typ)
	}
	cp.pushMu.Lock()
	defer cp.pushMu.Unlock() // held so versions and updates stay in order
	cp.version[typ]++
	v := controlplane.ShortType(typ) + "-" + strconv.FormatUint(cp.version[typ], 10)
	t0 := time.Now()
	c.SetResources(res)
	return v, t0, nil
}

// Clusters builds n EDS clusters totalling about size bytes; tag makes each push differ.
func Clusters(n, size int, tag string) map[string]types.Resource {
	filler := strings.Repeat("x", max(size/max(n, 1)-60, 1))
	out := make(map[string]types.Resource, n)
	for k := range n {
		name := fmt.Sprintf("outbound|80||svc-%05d.ns.svc.cluster.local", k)
		out[name] = &cluster.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: tag + filler}}
	}
	return out
}

// Listeners builds n empty listeners.
func Listeners(n int) map[string]types.Resource {
	out := make(map[string]types.Resource, n)
	for k := range n {
		name := fmt.Sprintf("0.0.0.0_%d", 8000+k)
		out[name] = &listener.Listener{Name: name}
	}
	return out
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/lab/controlplane"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// TestForwardsALargePush carries a Delta ADS stream through the forwarder: the token and cluster
// id reach the control plane (which refuses a stream without them), and 6 MB of clusters, more
// than every window on either hop, arrive intact, then an ACK and a second push.
func TestForwardsALargePush(t *testing.T) {
	srv, err := controlplane.New(controlplane.Config{Token: "tok", Types: []string{clusterType},
		Metadata: map[string]string{"ClusterID": "Kubernetes"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.RootPEM())
	sock := filepath.Join(t.TempDir(), "xds")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, ln, upstream{addr: srv.Addr(), extra: metaFlag{{"authorization", "Bearer tok"}, {"clusterid", "Kubernetes"}},
			tls: &tls.Config{RootCAs: pool, ServerName: controlplane.ServerName, NextProtos: []string{"h2"}}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	push := func(tag string) int {
		res := map[string]types.Resource{}
		size := 0
		for i := range 60 {
			c := &cluster.Cluster{Name: tag + strings.Repeat("x", 10) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
				AltStatName: strings.Repeat(tag, 100<<10/len(tag))}
			res[c.Name] = c
			size += proto.Size(c)
		}
		srv.Cache(clusterType).SetResources(res)
		return size
	}
	want := push("one")
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: "sidecar~1"}, TypeUrl: clusterType}); err != nil {
		t.Fatal(err)
	}
	check := func(tag string, want int) *discovery.DeltaDiscoveryResponse {
		t.Helper()
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, res := range r.GetResources() {
			var c cluster.Cluster
			if err := res.GetResource().UnmarshalTo(&c); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.AltStatName, tag) {
				t.Fatalf("cluster %s from the wrong push", c.Name)
			}
			got += proto.Size(&c)
		}
		if got != want || len(r.GetResources()) != 60 {
			t.Fatalf("%s: %d resources, %d bytes; want 60, %d", tag, len(r.GetResources()), got, want)
		}
		return r
	}
	r := check("one", want)
	if err := st.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: r.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	want = push("two")
	check("two", want)
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	cc.Close()
}

func TestRefusesBadFlags(t *testing.T) {
	if err := run(t.Context(), []string{"-listen", "x"}); err == nil {
		t.Error("no error without -upstream and -root")
	}
	var m metaFlag
	if err := m.Set("novalue"); err == nil {
		t.Error("meta without = accepted")
	}
}

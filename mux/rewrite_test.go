package mux

import (
	"context"
	"errors"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestRewritersPerType: two types registered in Config.Rewriters, neither ECDS, each get their
// own rewrite: Clusters are replaced (the client gets the rewriter's frame), Listeners refused
// (the agent NACKs upstream and the client never sees it), and an unregistered type passes as it
// came. Nothing in mux names these types.
func TestRewritersPerType(t *testing.T) {
	nacked := make(chan *discovery.DiscoveryRequest, 1)
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		seen := map[string]bool{}
		for {
			var f fastpath.Frame
			if err := ss.RecvMsg(&f); err != nil {
				return nil
			}
			r := &discovery.DiscoveryRequest{}
			err := proto.Unmarshal(f.Data.Materialize(), r)
			f.Free()
			if err != nil {
				return err
			}
			if r.ErrorDetail != nil {
				nacked <- r
				continue
			}
			if r.ResponseNonce != "" || seen[r.TypeUrl] {
				continue
			}
			seen[r.TypeUrl] = true
			out := encodeResponse(t, r.TypeUrl, "1", 2, 10)
			err = ss.SendMsg(&out)
			out.Free()
			if err != nil {
				return err
			}
		}
	})
	replaced, err := proto.Marshal(&discovery.DiscoveryResponse{VersionInfo: "rewritten", TypeUrl: fastpath.ClusterType, Nonce: "kept?"})
	if err != nil {
		t.Fatal(err)
	}
	_, sock := testProxy(t, nil, func(c *Config) {
		c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true}
		c.Rewriters = map[string]Rewriter{
			fastpath.ClusterType: func(_ context.Context, in fastpath.Frame, _ bool) (fastpath.Frame, error) {
				in.Free()
				return fastpath.FrameOf(replaced), nil
			},
			fastpath.ListenerType: func(_ context.Context, in fastpath.Frame, _ bool) (fastpath.Frame, error) {
				in.Free()
				return fastpath.Frame{}, errors.New("listeners refused by the test")
			},
		}
	})
	ctx := testCtx(t)
	s, err := adsClient(t, sock).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	for _, typ := range []string{fastpath.ListenerType, fastpath.ClusterType, fastpath.RouteType} {
		if err := s.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: typ}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]*discovery.DiscoveryResponse{}
	for len(got) < 2 {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.TypeUrl == fastpath.ListenerType {
			t.Fatalf("the client got the refused Listener response %v", r)
		}
		got[r.TypeUrl] = r
	}
	if c := got[fastpath.ClusterType]; c.VersionInfo != "rewritten" || len(c.Resources) != 0 {
		t.Errorf("Cluster response %v, want the rewriter's", c)
	}
	if r := got[fastpath.RouteType]; r.VersionInfo != "1" || len(r.Resources) != 2 {
		t.Errorf("Route response %v, want Istiod's as sent", r)
	}
	select {
	case r := <-nacked:
		if r.TypeUrl != fastpath.ListenerType || !strings.Contains(r.ErrorDetail.GetMessage(), "refused by the test") {
			t.Errorf("NACK %v, want the Listener's with the rewriter's error", r)
		}
	case <-ctx.Done():
		t.Fatal("no NACK of the refused Listener response reached Istiod")
	}
}

// TestRewriterAndAgentTypeConflict: a type cannot be both the agent's and rewritten.
func TestRewriterAndAgentTypeConflict(t *testing.T) {
	_, err := New(Config{SocketPath: "x", Upstream: UpstreamConfig{Address: "x:1"},
		AgentTypes: map[string]Handler{fastpath.NameTableType: func([][]byte) error { return nil }},
		Rewriters: map[string]Rewriter{fastpath.NameTableType: func(_ context.Context, f fastpath.Frame, _ bool) (fastpath.Frame, error) {
			return f, nil
		}}})
	if err == nil || !strings.Contains(err.Error(), "both an agent type and rewritten") {
		t.Fatalf("New: %v", err)
	}
}

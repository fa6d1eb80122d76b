package cache

import (
	"context"
	"testing"
	"time"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
)

// FuzzRewriteECDS feeds arbitrary ECDS responses (SotW and Delta) to the rewrite backed by a
// real cache and module server: it must never panic; bytes that are not protobuf must be refused
// (the proxy NACKs them); whatever it returns must parse as the response type with the same
// number of resources.
func FuzzRewriteECDS(f *testing.F) {
	srv := newModuleServer(f)
	mod := wasmModule("fuzz")
	u := srv.serve("/f.wasm", mod)
	c := newTestCache(f, func(o *Options) { o.HTTPRequestMaxRetries = 1; o.HTTPRequestTimeout = time.Second })
	r := NewRewriter(c)
	seed := func(res ...[]byte) {
		var resp discovery.DiscoveryResponse
		var dresp discovery.DeltaDiscoveryResponse
		for _, b := range res {
			a := &anypb.Any{}
			_ = proto.Unmarshal(b, a)
			resp.Resources = append(resp.Resources, a)
			dresp.Resources = append(dresp.Resources, &discovery.Resource{Name: "seed", Resource: a})
		}
		sb, _ := proto.Marshal(&resp)
		db, _ := proto.Marshal(&dresp)
		f.Add(sb, false)
		f.Add(db, true)
	}
	anyBytes := func(m proto.Message) []byte { b, _ := proto.Marshal(tec(f, "seed", m)); return b }
	seed(anyBytes(&httpwasm.Wasm{Config: plugin(u, sum(mod), map[string]string{envPullPolicy: "Always", "K": "v"}, wasmv3.FailurePolicy_FAIL_OPEN)}))
	seed(anyBytes(&netwasm.Wasm{Config: plugin(u, "", nil, 0)}), anyBytes(&httpwasm.Wasm{}))
	seed(anyBytes(&httpwasm.Wasm{Config: plugin("http://127.0.0.1:1/x", "", nil, 0)}))
	f.Add([]byte{0x12, 0x02, 0x0a, 0x00}, false)
	f.Fuzz(func(t *testing.T, b []byte, delta bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		out, err := r.Rewrite(ctx, fastpath.FrameOf(b), delta)
		if err != nil {
			return
		}
		if !wireValid(b) {
			t.Fatalf("a response that is not protobuf was accepted: %x", b)
		}
		got := out.Data.Materialize()
		var n, m int
		if delta {
			var in, o discovery.DeltaDiscoveryResponse
			if proto.Unmarshal(b, &in) != nil {
				return
			}
			if err := proto.Unmarshal(got, &o); err != nil {
				t.Fatalf("rewritten Delta response does not parse: %v", err)
			}
			n, m = len(in.Resources), len(o.Resources)
		} else {
			var in, o discovery.DiscoveryResponse
			if proto.Unmarshal(b, &in) != nil {
				return
			}
			if err := proto.Unmarshal(got, &o); err != nil {
				t.Fatalf("rewritten response does not parse: %v", err)
			}
			n, m = len(in.Resources), len(o.Resources)
		}
		if n != m {
			t.Fatalf("%d resources in, %d out", n, m)
		}
	})
}

// wireValid reports whether b is a sequence of well-formed protobuf fields (what any
// DiscoveryResponse is, at the top level).
func wireValid(b []byte) bool {
	for len(b) > 0 {
		_, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

package cache

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	udpa "github.com/cncf/xds/go/udpa/type/v1"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	httprbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netrbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wingman-mesh/wingman/cache/internal/wasmdesc"
	"github.com/wingman-mesh/wingman/fastpath"
)

// plugin is a WasmPlugin as Istiod renders it (pilot/pkg/model/extensions.go): remote code with
// a 30s timeout, the agent's variables in the VM environment, a StringValue configuration.
func plugin(url, sha string, env map[string]string, policy wasmv3.FailurePolicy) *wasmv3.PluginConfig {
	vm := &wasmv3.VmConfig{Runtime: "envoy.wasm.runtime.v8",
		Code: &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Remote{Remote: &core.RemoteDataSource{
			HttpUri: &core.HttpUri{Uri: url, Timeout: durationpb.New(30 * time.Second),
				HttpUpstreamType: &core.HttpUri_Cluster{Cluster: url}},
			Sha256: sha}}}}
	if env != nil {
		vm.EnvironmentVariables = &wasmv3.EnvironmentVariables{KeyValues: env}
	}
	cfg, _ := anypb.New(wrapperspb.String(`{"header":"x-wasm"}`))
	return &wasmv3.PluginConfig{Name: "ns.plugin", RootId: "root", Configuration: cfg, FailurePolicy: policy,
		Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: vm}}
}

func tec(t testing.TB, name string, typed proto.Message) *anypb.Any {
	t.Helper()
	tc, err := anypb.New(typed)
	if err != nil {
		t.Fatal(err)
	}
	a, err := anypb.New(&core.TypedExtensionConfig{Name: name, TypedConfig: tc})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sotwFrame(t testing.TB, res ...*anypb.Any) fastpath.Frame {
	b, err := proto.Marshal(&discovery.DiscoveryResponse{VersionInfo: "v1", Nonce: "n1", TypeUrl: fastpath.ExtensionConfigType, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	return fastpath.FrameOf(b)
}

func decodeSotW(t testing.TB, f fastpath.Frame) *discovery.DiscoveryResponse {
	t.Helper()
	out := &discovery.DiscoveryResponse{}
	if err := proto.Unmarshal(f.Data.Materialize(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func unpackTEC(t testing.TB, a *anypb.Any) (*core.TypedExtensionConfig, proto.Message) {
	t.Helper()
	ec := &core.TypedExtensionConfig{}
	if err := a.UnmarshalTo(ec); err != nil {
		t.Fatal(err)
	}
	m, err := ec.TypedConfig.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	return ec, m
}

func newTestRewriter(t testing.TB, edit func(*Options)) (*Rewriter, *Cache) {
	c := newTestCache(t, edit)
	return NewRewriter(c), c
}

func TestRewriteHTTPWasmToLocalFile(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("http")
	u := srv.serve("/http.wasm", mod)
	r, _ := newTestRewriter(t, nil)
	env := map[string]string{"KEEP": "me", envPullPolicy: "IfNotPresent", envResourceVersion: "7",
		"ISTIO_META_WASM_OTHER": "x", envPullSecret: `{"auths":{}}`}
	in := plugin(u, sum(mod), env, wasmv3.FailurePolicy_FAIL_CLOSED)
	res := tec(t, "extensions.istio.io/wasmplugin/ns.plugin", &httpwasm.Wasm{Config: in})
	other := tec(t, "other", &udpa.TypedStruct{TypeUrl: "type.googleapis.com/some.Filter"})
	out, err := r.Rewrite(ctxT(t), sotwFrame(t, res, other), false)
	if err != nil {
		t.Fatal(err)
	}
	resp := decodeSotW(t, out)
	if resp.Nonce != "n1" || resp.VersionInfo != "v1" || len(resp.Resources) != 2 {
		t.Fatalf("response fields changed: %v", resp)
	}
	if !proto.Equal(resp.Resources[1], other) {
		t.Error("the non-Wasm resource changed")
	}
	ec, m := unpackTEC(t, resp.Resources[0])
	got, ok := m.(*httpwasm.Wasm)
	if !ok || ec.Name != "extensions.istio.io/wasmplugin/ns.plugin" {
		t.Fatalf("got %s %T", ec.Name, m)
	}
	file := got.Config.GetVmConfig().GetCode().GetLocal().GetFilename()
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, mod) {
		t.Fatalf("local file %q: %v", file, err)
	}
	// Expected: the input with the code local and only the non-Istio variable left.
	want := proto.Clone(in).(*wasmv3.PluginConfig)
	want.GetVmConfig().Code = &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Local{Local: &core.DataSource{Specifier: &core.DataSource_Filename{Filename: file}}}}
	want.GetVmConfig().EnvironmentVariables = &wasmv3.EnvironmentVariables{KeyValues: map[string]string{"KEEP": "me"}}
	if !proto.Equal(want, got.Config) {
		t.Errorf("rewritten plugin:\n got %v\nwant %v", got.Config, want)
	}
}

func TestRewriteNetworkAndTypedStruct(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("net")
	u := srv.serve("/net.wasm", mod)
	r, _ := newTestRewriter(t, nil)
	netRes := tec(t, "net", &netwasm.Wasm{Config: plugin(u, "", map[string]string{envPullPolicy: "Always"}, 0)})
	// A TypedStruct holding the HTTP filter as JSON (EnvoyFilter style), sha256 "nil" as Istiod's placeholder.
	js, err := protojson.Marshal(&httpwasm.Wasm{Config: plugin(u, "nil", nil, wasmv3.FailurePolicy_FAIL_OPEN)})
	if err != nil {
		t.Fatal(err)
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(js, st); err != nil {
		t.Fatal(err)
	}
	tsRes := tec(t, "ts", &udpa.TypedStruct{TypeUrl: wasmHTTPType, Value: st})
	out, err := r.Rewrite(ctxT(t), sotwFrame(t, netRes, tsRes), false)
	if err != nil {
		t.Fatal(err)
	}
	resp := decodeSotW(t, out)
	_, m := unpackTEC(t, resp.Resources[0])
	nw, ok := m.(*netwasm.Wasm)
	if !ok || nw.Config.GetVmConfig().GetCode().GetLocal().GetFilename() == "" || nw.Config.GetVmConfig().EnvironmentVariables != nil {
		t.Errorf("network Wasm not rewritten: %v", m)
	}
	_, m = unpackTEC(t, resp.Resources[1])
	hw, ok := m.(*httpwasm.Wasm)
	if !ok || hw.Config.GetVmConfig().GetCode().GetLocal().GetFilename() == "" || hw.Config.GetConfiguration() == nil {
		t.Errorf("TypedStruct not converted to a local-file Wasm filter: %v", m)
	}
}

func TestFailOpenAndClosedFallbacks(t *testing.T) {
	srv := newModuleServer(t)
	bad := srv.URL + "/missing.wasm"
	r, c := newTestRewriter(t, nil)
	cases := []struct {
		name  string
		typed proto.Message
		want  proto.Message
	}{
		{"http-closed", &httpwasm.Wasm{Config: plugin(bad, "", nil, wasmv3.FailurePolicy_FAIL_CLOSED)},
			&httprbac.RBAC{Rules: &rbacv3.RBAC{}, RulesStatPrefix: "wasm-default-deny"}},
		{"http-default", &httpwasm.Wasm{Config: plugin(bad, "", nil, 0)},
			&httprbac.RBAC{Rules: &rbacv3.RBAC{}, RulesStatPrefix: "wasm-default-deny"}},
		{"http-open", &httpwasm.Wasm{Config: plugin(bad, "", nil, wasmv3.FailurePolicy_FAIL_OPEN)},
			&httprbac.RBAC{RulesStatPrefix: "wasm-default-allow"}},
		{"http-open-legacy", &httpwasm.Wasm{Config: func() *wasmv3.PluginConfig {
			p := plugin(bad, "", nil, 0)
			p.FailOpen = true //nolint:staticcheck // the deprecated field Istio still reads
			return p
		}()}, &httprbac.RBAC{RulesStatPrefix: "wasm-default-allow"}},
		{"net-closed", &netwasm.Wasm{Config: plugin(bad, "", nil, wasmv3.FailurePolicy_FAIL_RELOAD)},
			&netrbac.RBAC{Rules: &rbacv3.RBAC{}, StatPrefix: "wasm-default-deny"}},
		{"net-open", &netwasm.Wasm{Config: plugin(bad, "", nil, wasmv3.FailurePolicy_FAIL_OPEN)},
			&netrbac.RBAC{StatPrefix: "wasm-default-allow"}},
		{"secret-missing", &httpwasm.Wasm{Config: plugin(bad, "", map[string]string{envPullSecret: ""}, wasmv3.FailurePolicy_FAIL_OPEN)},
			&httprbac.RBAC{RulesStatPrefix: "wasm-default-allow"}},
		{"no-http-uri", &httpwasm.Wasm{Config: func() *wasmv3.PluginConfig {
			p := plugin(bad, "", nil, 0)
			p.GetVmConfig().GetCode().GetRemote().HttpUri = nil
			return p
		}()}, &httprbac.RBAC{Rules: &rbacv3.RBAC{}, RulesStatPrefix: "wasm-default-deny"}},
	}
	for _, tc := range cases {
		out, err := r.Rewrite(ctxT(t), sotwFrame(t, tec(t, tc.name, tc.typed)), false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ec, m := unpackTEC(t, decodeSotW(t, out).Resources[0])
		if ec.Name != tc.name || !proto.Equal(m, tc.want) {
			t.Errorf("%s: got %s %v, want %v", tc.name, ec.Name, m, tc.want)
		}
		// Byte-identical to Istio's anypb.New of the same message.
		want, _ := anypb.New(tc.want)
		if !bytes.Equal(ec.TypedConfig.Value, want.Value) {
			t.Errorf("%s: fallback bytes %x, go-control-plane encodes %x", tc.name, ec.TypedConfig.Value, want.Value)
		}
	}
	if v, _ := c.o.Registerer.Value("wasm_config_conversion_count", "result", "fetch_failure"); v < 6 {
		t.Errorf("fetch_failure conversions = %v", v)
	}
	if v, _ := c.o.Registerer.Value("wasm_config_conversion_count", "result", "miss_remote_fetch_hint"); v != 1 {
		t.Errorf("miss_remote_fetch_hint conversions = %v", v)
	}
}

func TestNonWasmAndLocalPassUntouched(t *testing.T) {
	r, _ := newTestRewriter(t, nil)
	local := &httpwasm.Wasm{Config: &wasmv3.PluginConfig{Name: "local", Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: &wasmv3.VmConfig{
		Code: &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Local{Local: &core.DataSource{Specifier: &core.DataSource_Filename{Filename: "/etc/x.wasm"}}}}}}}}
	in := sotwFrame(t, tec(t, "rbac", &httprbac.RBAC{}), tec(t, "local", local))
	want := in.Data.Materialize()
	out, err := r.Rewrite(ctxT(t), in, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Data.Materialize(); !bytes.Equal(got, want) {
		t.Error("response without remote Wasm changed")
	}
	if &out.Data[0].ReadOnlyData()[0] != &in.Data[0].ReadOnlyData()[0] {
		t.Error("response without remote Wasm was copied")
	}
}

func TestGarbageIsAnError(t *testing.T) {
	r, _ := newTestRewriter(t, nil)
	noCode := &httpwasm.Wasm{Config: &wasmv3.PluginConfig{Name: "nocode"}}
	notTEC, _ := anypb.New(&core.Node{Id: "x"})
	noTyped, _ := anypb.New(&core.TypedExtensionConfig{Name: "empty"})
	badInner, _ := anypb.New(&core.TypedExtensionConfig{Name: "bad", TypedConfig: &anypb.Any{TypeUrl: wasmHTTPType, Value: []byte{0x0a, 0x05, 0x01}}})
	for name, res := range map[string]*anypb.Any{"no code": tec(t, "nocode", noCode), "not a TypedExtensionConfig": notTEC,
		"no typed config": noTyped, "truncated Wasm": badInner} {
		_, err := r.Rewrite(ctxT(t), sotwFrame(t, res), false)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := r.Rewrite(ctxT(t), fastpath.FrameOf([]byte{0x12, 0x7f, 0x00}), false); err == nil {
		t.Error("truncated response: no error")
	}
}

func TestRewriteDelta(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("delta")
	u := srv.serve("/d.wasm", mod)
	r, _ := newTestRewriter(t, nil)
	res := tec(t, "d", &httpwasm.Wasm{Config: plugin(u, sum(mod), nil, 0)})
	in := &discovery.DeltaDiscoveryResponse{Nonce: "dn", TypeUrl: fastpath.ExtensionConfigType, RemovedResources: []string{"gone"},
		Resources: []*discovery.Resource{{Name: "d", Version: "3", Resource: res}, {Name: "heartbeat", Version: "1"}}}
	b, _ := proto.Marshal(in)
	out, err := r.Rewrite(ctxT(t), fastpath.FrameOf(b), true)
	if err != nil {
		t.Fatal(err)
	}
	got := &discovery.DeltaDiscoveryResponse{}
	if err := proto.Unmarshal(out.Data.Materialize(), got); err != nil {
		t.Fatal(err)
	}
	if got.Nonce != "dn" || len(got.RemovedResources) != 1 || got.Resources[0].Name != "d" || got.Resources[0].Version != "3" || got.Resources[1].Resource != nil {
		t.Fatalf("delta fields changed: %v", got)
	}
	_, m := unpackTEC(t, got.Resources[0].Resource)
	if f := m.(*httpwasm.Wasm).Config.GetVmConfig().GetCode().GetLocal().GetFilename(); !strings.HasSuffix(f, sum(mod)+".wasm") {
		t.Errorf("delta resource points at %q", f)
	}
}

func TestRewriteCancelled(t *testing.T) {
	srv := newModuleServer(t)
	release := make(chan struct{})
	defer close(release)
	arrived := make(chan struct{}, 1)
	u := srv.handle("/hang.wasm", func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	r, _ := newTestRewriter(t, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	// Cancelled once the fetch is under way (the server has the request), not after a while.
	go func() {
		select {
		case <-arrived:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := r.Rewrite(ctx, sotwFrame(t, tec(t, "h", &httpwasm.Wasm{Config: plugin(u, "", nil, wasmv3.FailurePolicy_FAIL_OPEN)})), false)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled rewrite: %v (want the cancellation, not a fallback)", err)
	}
}

// TestEmbeddedDescriptorsCurrent checks wasm.pb.gz against go-control-plane (go generate).
func TestEmbeddedDescriptorsCurrent(t *testing.T) {
	want, err := wasmdesc.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, wasmDescriptors) {
		t.Error("wasm.pb.gz is stale: run go generate ./cache")
	}
	if _, err := loadWasmTypes(); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wingman-mesh/wingman/lab/meshlab"
)

// wasmPluginName is the ECDS resource name Istiod gives a WasmPlugin (WasmPluginResourceNamePrefix).
const wasmPluginName = "extensions.istio.io/wasmplugin/" + namespace + ".hello"

// demoWasm is a minimal Wasm module: the header and one custom section.
var demoWasm = append([]byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x0a}, "wingman-hi"...)

// wasm publishes a WasmPlugin the way Istiod renders it (an ECDS resource whose Wasm code is a
// remote http URL with its sha256, and the agent's ISTIO_META_ variables in the VM environment);
// meshlab serves the module over HTTP. A client speaking ADS over the agent's XDS socket, as
// Envoy does, must receive the resource rewritten to a local file holding the same bytes,
// without the agent's variables.
func (d *demo) wasm(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	srvCtx, stop := context.WithCancel(ctx)
	defer stop()
	base, err := meshlab.ServeWasm(srvCtx, &wg, map[string][]byte{"/hello.wasm": demoWasm})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(demoWasm)
	doc := fmt.Sprintf(`kind: ExtensionConfig
clients: envoy
name: %q
typed_config:
  "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
  config:
    name: %s.hello
    root_id: hello
    fail_open: false
    vm_config:
      runtime: envoy.wasm.runtime.v8
      code:
        remote:
          http_uri: {uri: %q, cluster: %q, timeout: 30s}
          sha256: %s
      environment_variables:
        key_values:
          ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION: "1"
          GREETING: hi
`, wasmPluginName, namespace, base+"/hello.wasm", base+"/hello.wasm", hex.EncodeToString(sum[:]))
	path := filepath.Join(d.root, "meshlab", "resources", "zz-wasmplugin.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return "", err
	}
	if _, err := d.waitLoad(ctx, func(r meshlab.LoadResult) bool { return r.Err == nil }); err != nil {
		return "", fmt.Errorf("meshlab did not load %s: %w", path, err)
	}
	cc, err := grpc.NewClient("unix://"+filepath.Join(d.root, "etc", "istio", "proxy", "XDS"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer cc.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return "", err
	}
	defer stream.CloseSend()
	node := &core.Node{Id: "sidecar~127.0.0.1~wasm-demo." + namespace + "~" + namespace + ".svc.cluster.local", Cluster: "wasm-demo." + namespace}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: ecdsType, ResourceNames: []string{wasmPluginName}}); err != nil {
		return "", err
	}
	resp, err := stream.Recv()
	if err != nil {
		return "", fmt.Errorf("no ECDS response: %w", err)
	}
	if len(resp.Resources) != 1 {
		return "", fmt.Errorf("ECDS response holds %d resources, want 1", len(resp.Resources))
	}
	ec := &core.TypedExtensionConfig{}
	w := &httpwasm.Wasm{}
	if err := resp.Resources[0].UnmarshalTo(ec); err != nil {
		return "", err
	}
	if err := ec.TypedConfig.UnmarshalTo(w); err != nil {
		return "", fmt.Errorf("%s is not a Wasm filter after the agent (%s): %w", ec.Name, ec.TypedConfig.GetTypeUrl(), err)
	}
	vm := w.Config.GetVmConfig()
	file := vm.GetCode().GetLocal().GetFilename()
	if file == "" {
		return "", fmt.Errorf("%s still loads %v", ec.Name, vm.GetCode())
	}
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, demoWasm) {
		return "", fmt.Errorf("local file %s: %v (bytes equal: %v)", file, err, bytes.Equal(got, demoWasm))
	}
	env := vm.GetEnvironmentVariables().GetKeyValues()
	if _, leaked := env["ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"]; leaked || env["GREETING"] != "hi" {
		return "", fmt.Errorf("VM environment after the agent: %v (want GREETING only)", env)
	}
	_ = stream.Send(&discovery.DiscoveryRequest{TypeUrl: ecdsType, ResourceNames: []string{wasmPluginName}, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce})
	rel := strings.TrimPrefix(file, d.root+string(filepath.Separator))
	return fmt.Sprintf("meshlab served WasmPlugin %s with its module at %s/hello.wasm;\n"+
		"an ADS client on ./etc/istio/proxy/XDS got it rewritten to the local file ./%s\n"+
		"(%d bytes, sha256 %s…, matching; ISTIO_META_ variables stripped)", wasmPluginName, base, rel, len(got), hex.EncodeToString(sum[:])[:12]), nil
}

const ecdsType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

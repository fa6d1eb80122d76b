package cache

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// testRegistry is go-containerregistry's in-process registry behind a real HTTP server,
// optionally requiring basic auth, counting manifest requests.
type testRegistry struct {
	*httptest.Server
	host      string
	manifests atomic.Int32
}

func newTestRegistry(t testing.TB, user, pass string) *testRegistry {
	r := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if strings.Contains(req.URL.Path, "/manifests/") && req.Method != http.MethodPut {
			r.manifests.Add(1)
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(r.URL, "http://")
	return r
}

func pluginTarGz(t testing.TB, mod []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"README", []byte("hi")}, {"plugin.wasm", mod}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.b))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(f.b)
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// image builds one of the layouts Istio reads.
func image(t testing.TB, layout string, mod []byte) v1.Image {
	t.Helper()
	var img v1.Image = empty.Image
	var layer v1.Layer
	switch layout {
	case "docker":
		layer = static.NewLayer(pluginTarGz(t, mod), types.DockerLayer)
	case "oci-compat":
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		layer = static.NewLayer(pluginTarGz(t, mod), types.OCILayer)
	case "oci-artifact":
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, "application/vnd.module.wasm.config.v1+json")
		layer = static.NewLayer(mod, wasmLayerType)
	}
	img, err := mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t testing.TB, r *testRegistry, ref string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	nr, err := name.ParseReference(r.host + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(nr, img, opts...); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.Hex
}

func TestOCILayouts(t *testing.T) {
	reg := newTestRegistry(t, "", "")
	c := newTestCache(t, nil)
	for _, layout := range []string{"docker", "oci-compat", "oci-artifact"} {
		mod := wasmModule(layout)
		digest := push(t, reg, "wasm/"+layout+":v1", image(t, layout, mod))
		u := "oci://" + reg.host + "/wasm/" + layout + ":v1"
		p, err := c.Get(ctxT(t), u, GetOptions{Checksum: digest})
		if err != nil {
			t.Fatalf("%s: %v", layout, err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, mod) {
			t.Errorf("%s: module differs", layout)
		}
		// Pinned by digest in the URL: verified against it, served from the cache.
		if p2, err := c.Get(ctxT(t), "oci://"+reg.host+"/wasm/"+layout+"@sha256:"+digest, GetOptions{}); err != nil || p2 != p {
			t.Errorf("%s by digest: %q, %v", layout, p2, err)
		}
		if _, err := c.Get(ctxT(t), u, GetOptions{Checksum: strings.Repeat("0", 64)}); err == nil || !strings.Contains(err.Error(), "does not match") {
			t.Errorf("%s: wrong digest: %v", layout, err)
		}
	}
	bad := static.NewLayer([]byte("not a tarball"), types.OCILayer)
	img, _ := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), bad)
	push(t, reg, "wasm/bad:v1", img)
	if _, err := c.Get(ctxT(t), "oci://"+reg.host+"/wasm/bad:v1", GetOptions{}); err == nil {
		t.Error("an image without a module was accepted")
	}
}

func TestOCIPullSecret(t *testing.T) {
	reg := newTestRegistry(t, "puller", "s3cret")
	mod := wasmModule("private")
	push(t, reg, "private/p:v1", image(t, "oci-artifact", mod), remote.WithAuth(basicAuth{"puller", "s3cret"}))
	u := "oci://" + reg.host + "/private/p:v1"
	c := newTestCache(t, nil)
	if _, err := c.Get(ctxT(t), u, GetOptions{}); err == nil {
		t.Fatal("pulled from a private registry without the secret")
	}
	wrong := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte("puller:nope")))
	if _, err := c.Get(ctxT(t), u, GetOptions{PullSecret: []byte(wrong)}); err == nil {
		t.Fatal("pulled with a wrong secret")
	}
	secret := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte("puller:s3cret")))
	p, err := c.Get(ctxT(t), u, GetOptions{PullSecret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, mod) {
		t.Error("module differs")
	}
}

type basicAuth struct{ user, pass string }

func (b basicAuth) Authorization() (*authn.AuthConfig, error) {
	return &authn.AuthConfig{Username: b.user, Password: b.pass}, nil
}

func TestOCIPullPolicy(t *testing.T) {
	reg := newTestRegistry(t, "", "")
	c := newTestCache(t, nil)
	push(t, reg, "wasm/p:latest", image(t, "oci-artifact", wasmModule("v1")))
	push(t, reg, "wasm/p:1.0", image(t, "oci-artifact", wasmModule("v1")))
	get := func(tag string, o GetOptions) []byte {
		t.Helper()
		o.ResourceName = "res"
		p, err := c.Get(ctxT(t), "oci://"+reg.host+"/wasm/p:"+tag, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		return b
	}
	get("latest", GetOptions{ResourceVersion: "1"})
	get("1.0", GetOptions{ResourceVersion: "1"})
	push(t, reg, "wasm/p:latest", image(t, "oci-artifact", wasmModule("v2")))
	push(t, reg, "wasm/p:1.0", image(t, "oci-artifact", wasmModule("v2")))
	before := reg.manifests.Load()
	// Unchanged resource version: cached whatever the tag (Istio pulls Always only on a change).
	if b := get("latest", GetOptions{ResourceVersion: "1"}); !bytes.Equal(b, wasmModule("v1")) || reg.manifests.Load() != before {
		t.Error("latest pulled again with the same resource version")
	}
	// :latest defaults to Always: a new resource version pulls the new image.
	if b := get("latest", GetOptions{ResourceVersion: "2"}); !bytes.Equal(b, wasmModule("v2")) {
		t.Error("latest with a new resource version did not pull again")
	}
	// Another tag defaults to IfNotPresent.
	if b := get("1.0", GetOptions{ResourceVersion: "2"}); !bytes.Equal(b, wasmModule("v1")) {
		t.Error("tag 1.0 pulled again under IfNotPresent")
	}
	// Always, explicitly.
	if b := get("1.0", GetOptions{ResourceVersion: "3", PullPolicy: PullAlways}); !bytes.Equal(b, wasmModule("v2")) {
		t.Error("Always did not pull again")
	}
}

// TestRewriteOCIPullSecret: Istiod carries the WasmPlugin's image pull secret in the VM
// environment; the agent pulls with it and Envoy never sees it.
func TestRewriteOCIPullSecret(t *testing.T) {
	reg := newTestRegistry(t, "puller", "s3cret")
	mod := wasmModule("secret")
	digest := push(t, reg, "private/w:1.0", image(t, "docker", mod), remote.WithAuth(basicAuth{"puller", "s3cret"}))
	secret := fmt.Sprintf(`{"auths":{%q:{"username":"puller","password":"s3cret"}}}`, reg.host)
	r, _ := newTestRewriter(t, nil)
	in := plugin("oci://"+reg.host+"/private/w:1.0", digest, map[string]string{envPullSecret: secret, envPullPolicy: "IfNotPresent"}, wasmv3.FailurePolicy_FAIL_CLOSED)
	out, err := r.Rewrite(ctxT(t), sotwFrame(t, tec(t, "oci", &httpwasm.Wasm{Config: in})), false)
	if err != nil {
		t.Fatal(err)
	}
	_, m := unpackTEC(t, decodeSotW(t, out).Resources[0])
	w, ok := m.(*httpwasm.Wasm)
	if !ok {
		t.Fatalf("got %T (a fallback?)", m)
	}
	vm := w.Config.GetVmConfig()
	if b, err := os.ReadFile(vm.GetCode().GetLocal().GetFilename()); err != nil || !bytes.Equal(b, mod) {
		t.Fatalf("local module: %v", err)
	}
	if vm.EnvironmentVariables != nil {
		t.Errorf("the pull secret reached Envoy: %v", vm.EnvironmentVariables)
	}
}

// TestInsecureRegistries: a server with a certificate nobody trusts is refused, unless its host
// is in WASM_INSECURE_REGISTRIES (or "*"), for https modules and for registries alike.
func TestInsecureRegistries(t *testing.T) {
	mod := wasmModule("tls")
	regHandler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tlsReg := httptest.NewTLSServer(regHandler)
	defer tlsReg.Close()
	regHost := strings.TrimPrefix(tlsReg.URL, "https://")
	nr, _ := name.ParseReference(regHost + "/wasm/tls:v1")
	if err := remote.Write(nr, image(t, "oci-compat", mod), remote.WithTransport(tlsReg.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(mod) }))
	defer web.Close()
	webHost := strings.TrimPrefix(web.URL, "https://")
	urls := []string{web.URL + "/m.wasm", "oci://" + regHost + "/wasm/tls:v1"}
	strict := newTestCache(t, func(o *Options) { o.HTTPRequestMaxRetries = 1 })
	for _, u := range urls {
		if _, err := strict.Get(ctxT(t), u, GetOptions{}); err == nil {
			t.Errorf("%s: fetched from an untrusted server without WASM_INSECURE_REGISTRIES", u)
		}
	}
	for _, insecure := range [][]string{{webHost, regHost}, {"*"}} {
		c := newTestCache(t, func(o *Options) { o.InsecureRegistries = insecure })
		for _, u := range urls {
			p, err := c.Get(ctxT(t), u, GetOptions{})
			if err != nil {
				t.Errorf("%s with %v insecure: %v", u, insecure, err)
				continue
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, mod) {
				t.Errorf("%s: module differs", u)
			}
		}
	}
}

package envoyproto

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"runtime"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto/internal/descset"
)

// TestEmbeddedDescriptorsCurrent fails when envoy.pb.gz no longer matches the go-control-plane in
// go.mod: run `go generate ./bootstrap/envoyproto`.
func TestEmbeddedDescriptorsCurrent(t *testing.T) {
	fresh, err := descset.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gunzip(t, fresh), gunzip(t, envoyDescriptors)) {
		t.Fatal("envoy.pb.gz is stale: run go generate ./bootstrap/envoyproto")
	}
}

// TestDynamicMatchesGenerated: every message the embedded set knows has the same descriptor as
// go-control-plane's generated type, and a bootstrap parsed dynamically re-parses into the typed
// Bootstrap with the same bytes.
func TestDynamicMatchesGenerated(t *testing.T) {
	reg, err := loadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	reg.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		gen, err := protoregistry.GlobalFiles.FindFileByPath(fd.Path())
		if err != nil {
			t.Errorf("%s: not linked by go-control-plane: %v", fd.Path(), err)
			return true
		}
		if fd.Messages().Len() != gen.Messages().Len() || fd.Enums().Len() != gen.Enums().Len() {
			t.Errorf("%s: %d messages/%d enums, generated has %d/%d", fd.Path(),
				fd.Messages().Len(), fd.Enums().Len(), gen.Messages().Len(), gen.Enums().Len())
		}
		n++
		return true
	})
	if n < 100 {
		t.Fatalf("only %d files in the embedded set", n)
	}
	if _, err := reg.types.FindMessageByURL("type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"); err != nil {
		t.Fatalf("HCM not resolvable: %v", err)
	}

	data := []byte(`{"node":{"id":"n"},"static_resources":{"clusters":[{"name":"c","type":"STATIC",
		"typed_extension_protocol_options":{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":{
		"@type":"type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
		"explicit_http_config":{"http2_protocol_options":{}}}}}]},"stats_flush_interval":"5s"}`)
	dyn := reg.newBootstrap()
	if err := (protojson.UnmarshalOptions{Resolver: reg.types}).Unmarshal(data, dyn); err != nil {
		t.Fatal(err)
	}
	typed := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(data, typed); err != nil {
		t.Fatal(err)
	}
	det := proto.MarshalOptions{Deterministic: true}
	a, err := det.Marshal(dyn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := det.Marshal(typed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("dynamic and generated encodings differ:\n%x\n%x", a, b)
	}
}

func TestNewRegistryBadInput(t *testing.T) {
	for name, in := range map[string][]byte{
		"not gzip":        []byte("nope"),
		"not descriptors": gz(t, []byte{0xff, 0xff, 0xff}),
		"empty set":       gz(t, nil),
	} {
		if _, err := newRegistry(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestDescriptorsFreedAfterUse: Validate and MergeOverride build Envoy's descriptors on first use
// and leave none held once they return (the agent that merged an override at start-up idles
// without them).
func TestDescriptorsFreedAfterUse(t *testing.T) {
	data := []byte(`{"node":{"id":"n"},"stats_flush_interval":"5s"}`)
	for _, use := range []func() error{
		func() error {
			if f := Validate(data); len(f) != 0 {
				return fmt.Errorf("findings %v", f)
			}
			return nil
		},
		func() error { _, err := MergeOverride(data, []byte("node: {cluster: c}")); return err },
	} {
		if err := use(); err != nil {
			t.Fatal(err)
		}
		freed := false
		for range 10 {
			if runtime.GC(); !envoySet.Held() {
				freed = true
				break
			}
		}
		if !freed {
			t.Fatal("envoy descriptors still held after use")
		}
	}
}

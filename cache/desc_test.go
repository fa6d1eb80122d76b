package cache

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"testing"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

// typedStructValue is the encoded Struct of an HTTP Wasm filter as an EnvoyFilter writes it.
func typedStructValue(t testing.TB) (value []byte, want *httpwasm.Wasm) {
	t.Helper()
	want = &httpwasm.Wasm{Config: plugin("https://example.com/p.wasm", "nil", map[string]string{"A": "b"}, wasmv3.FailurePolicy_FAIL_OPEN)}
	js, err := protojson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(js, st); err != nil {
		t.Fatal(err)
	}
	if value, err = proto.Marshal(st); err != nil {
		t.Fatal(err)
	}
	return value, want
}

// TestStructToWasmAfterCollection: a conversion gives go-control-plane's typed filter, also after
// the descriptors were collected and built again.
func TestStructToWasmAfterCollection(t *testing.T) {
	value, want := typedStructValue(t)
	for round := range 2 {
		raw, err := structToWasm(value, false)
		if err != nil {
			t.Fatal(err)
		}
		got := &httpwasm.Wasm{}
		if err := proto.Unmarshal(raw, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("round %d: converted %v, want %v", round, got, want)
		}
		for range 10 {
			if runtime.GC(); !wasmSet.Held() {
				break
			}
		}
		if wasmSet.Held() {
			t.Fatal("wasm descriptors still held after the conversion")
		}
	}
}

// protodescWasmTypes builds the types as cache did before internal/lazydesc (descriptorpb and
// protodesc, linked here only by the test): the reference BenchmarkWasmDescriptors compares with.
func protodescWasmTypes(b *testing.B) *wasmTypes {
	zr, err := gzip.NewReader(bytes.NewReader(wasmDescriptors))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		b.Fatal(err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		b.Fatal(err)
	}
	t, err := newWasmTypes(files)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkWasmDescriptors is the cost of one TypedStruct conversion: with the descriptors built
// for it (first use, or after they were collected) the old way (protodesc) and now (lazydesc), and
// with them held.
func BenchmarkWasmDescriptors(b *testing.B) {
	value, _ := typedStructValue(b)
	convert := func(b *testing.B, t *wasmTypes) {
		if _, err := t.structToWasm(value, false); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first/protodesc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			convert(b, protodescWasmTypes(b))
		}
	})
	b.Run("first/lazydesc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			files, err := lazydesc.Build(wasmDescriptors)
			if err != nil {
				b.Fatal(err)
			}
			t, err := newWasmTypes(files)
			if err != nil {
				b.Fatal(err)
			}
			convert(b, t)
		}
	})
	b.Run("held", func(b *testing.B) {
		held, err := wasmSet.Files()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			t, err := loadWasmTypes()
			if err != nil {
				b.Fatal(err)
			}
			convert(b, t)
		}
		runtime.KeepAlive(held)
	})
}

package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wingman-mesh/wingman/fastpath"
)

// Type URLs the rewrite recognises (Istio: pkg/model WasmHTTPFilterType, WasmNetworkFilterType,
// TypedStructType).
const (
	wasmHTTPType    = fastpath.TypePrefix + "envoy.extensions.filters.http.wasm.v3.Wasm"
	wasmNetworkType = fastpath.TypePrefix + "envoy.extensions.filters.network.wasm.v3.Wasm"
	typedStructType = fastpath.TypePrefix + "udpa.type.v1.TypedStruct"
)

// Environment keys Istiod adds to the Wasm VM for the agent (Istio: pkg/model).
const (
	envPullSecret      = "ISTIO_META_WASM_IMAGE_PULL_SECRET"
	envPullPolicy      = "ISTIO_META_WASM_IMAGE_PULL_POLICY"
	envResourceVersion = "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"
	istioMetaPrefix    = "ISTIO_META_"
)

// getter is what the rewrite needs of the cache.
type getter interface {
	Get(ctx context.Context, url string, opts GetOptions) (string, error)
}

// Rewriter rewrites ECDS responses so that Wasm code with a remote source loads a cached file.
type Rewriter struct {
	c   getter
	m   *metrics
	log *slog.Logger
}

// NewRewriter returns the rewrite backed by c.
func NewRewriter(c *Cache) *Rewriter { return &Rewriter{c: c, m: c.m, log: c.o.Logger} }

// Rewrite takes an ECDS DiscoveryResponse (or DeltaDiscoveryResponse) and returns it with every
// remote Wasm module replaced by a local file, or by Istio's RBAC fallback when the module
// cannot be had. It owns in. A response with nothing to rewrite is returned as is, not copied.
// An error means a resource cannot be decoded: the response must be NACKed, not forwarded.
// Its signature is mux.Rewriter's.
func (r *Rewriter) Rewrite(ctx context.Context, in fastpath.Frame, delta bool) (fastpath.Frame, error) {
	start := time.Now()
	defer func() { r.m.conversionDuration.Observe(float64(time.Since(start).Milliseconds())) }()
	b := frameBytes(in)
	out, err := r.rewrite(ctx, b, delta)
	switch {
	case err != nil:
		in.Free()
		return fastpath.Frame{}, err
	case out == nil:
		return in, nil // nothing to rewrite: the bytes as received
	}
	in.Free() // out is a copy: b, which may point into in, is no longer used
	return fastpath.FrameOf(out), nil
}

func frameBytes(f fastpath.Frame) []byte {
	if len(f.Data) == 1 {
		return f.Data[0].ReadOnlyData()
	}
	return f.Data.Materialize()
}

// Field numbers: DiscoveryResponse and DeltaDiscoveryResponse both keep resources in 2; a Delta
// Resource keeps its Any in 2; Any is type_url 1, value 2; TypedExtensionConfig is name 1,
// typed_config 2.
const (
	respResources = 2
	resResource   = 2
	anyType       = 1
	anyValue      = 2
	tecName       = 1
	tecTyped      = 2
)

// rewrite returns the new response, or nil when nothing changed.
func (r *Rewriter) rewrite(ctx context.Context, b []byte, delta bool) ([]byte, error) {
	var anys [][]byte // each resource's Any, in order (nil: a Delta resource without one)
	err := eachField(b, respResources, func(v []byte) error {
		if !delta {
			anys = append(anys, v)
			return nil
		}
		var a []byte
		err := eachField(v, resResource, func(x []byte) error { a = x; return nil })
		anys = append(anys, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("malformed ECDS response: %w", err)
	}
	jobs := make([]*conversion, len(anys))
	n := 0
	for i, a := range anys {
		if a == nil {
			continue
		}
		cv, err := r.decode(a)
		if err != nil {
			r.m.conversions.With(unmarshalFailure).Inc()
			return nil, fmt.Errorf("ECDS resource %d: %w", i, err)
		}
		if cv == nil {
			r.m.conversions.With(noRemoteLoad).Inc()
			continue
		}
		jobs[i] = cv
		n++
	}
	if n == 0 {
		return nil, nil
	}
	if err := r.convertAll(ctx, jobs, n); err != nil {
		return nil, err
	}
	// Copy the response, replacing the converted resources' Any.
	i := 0
	out := make([]byte, 0, len(b)+256*n)
	out, err = rebuild(out, b, respResources, func(dst, v []byte) ([]byte, error) {
		cv := jobs[i]
		i++
		if cv == nil {
			return protowire.AppendBytes(dst, v), nil
		}
		if !delta {
			return protowire.AppendBytes(dst, cv.out), nil
		}
		res, err := rebuild(nil, v, resResource, func(d, _ []byte) ([]byte, error) {
			return protowire.AppendBytes(d, cv.out), nil
		})
		return protowire.AppendBytes(dst, res), err
	})
	return out, err
}

// convertAll fetches and rewrites; several resources fetch at once, each on a goroutine this
// call waits for.
func (r *Rewriter) convertAll(ctx context.Context, jobs []*conversion, n int) error {
	if n == 1 {
		for _, cv := range jobs {
			if cv != nil {
				return r.convert(ctx, cv)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, cv := range jobs {
		if cv != nil {
			wg.Go(func() { errs[i] = r.convert(ctx, cv) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

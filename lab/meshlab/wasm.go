package meshlab

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	// Registered so that ExtensionConfig documents may hold a WasmPlugin-style Wasm filter.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
)

// ServeWasm serves Wasm modules over HTTP on a loopback port, by path, until ctx is done (the
// server goroutine is added to wg), as a WasmPlugin's url points at a registry or web server.
// It returns the base URL.
func ServeWasm(ctx context.Context, wg *sync.WaitGroup, modules map[string][]byte) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := modules[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/wasm")
		_, _ = w.Write(b)
	})}
	wg.Go(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	return "http://" + l.Addr().String(), nil
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// agent is go-control-plane's real server on the two Unix sockets the bootstrap names, standing
// in for the agent: ADS (clusters, listeners) and SDS (default, ROOTCA).
type agent struct {
	caches map[string]*cachev3.LinearCache
	nacks  chan string    // error details of NACKs received
	acks   chan time.Time // when each Delta ACK of clusters arrived (dropped when full)
}

func startAgent(t *testing.T, xdsPath, sdsPath string) *agent {
	a := &agent{caches: map[string]*cachev3.LinearCache{}, nacks: make(chan string, 8), acks: make(chan time.Time, 8)}
	mc := &cachev3.MuxCache{Classify: func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() }, Caches: map[string]cachev3.Cache{}}
	for _, typ := range []string{clusterType, listenerType, secretType} {
		a.caches[typ] = cachev3.NewLinearCache(typ, cachev3.WithVersionPrefix(map[string]string{clusterType: "cds-",
			listenerType: "lds-", secretType: "sds-"}[typ]))
		mc.Caches[typ] = a.caches[typ]
	}
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			if r.ErrorDetail != nil {
				a.nacks <- r.ErrorDetail.Message
			}
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, r *discovery.DeltaDiscoveryRequest) error {
			if r.ErrorDetail != nil {
				a.nacks <- r.ErrorDetail.Message
			} else if r.ResponseNonce != "" && r.TypeUrl == clusterType {
				select {
				case a.acks <- time.Now():
				default:
				}
			}
			return nil
		},
	}
	xds := serverv3.NewServer(t.Context(), mc, cb)
	for _, path := range []string{xdsPath, sdsPath} {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		discovery.RegisterAggregatedDiscoveryServiceServer(srv, xds)
		secretv3.RegisterSecretDiscoveryServiceServer(srv, xds)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Stop(); <-done })
	}
	a.caches[clusterType].SetResources(map[string]types.Resource{"c1": &cluster.Cluster{Name: "c1"}})
	a.caches[listenerType].SetResources(map[string]types.Resource{"l1": &listener.Listener{Name: "l1"}})
	a.caches[secretType].SetResources(map[string]types.Resource{
		"default": &tlsv3.Secret{Name: "default", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: []byte("chain")}},
			PrivateKey:       &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: []byte("key")}}}}},
		"ROOTCA": &tlsv3.Secret{Name: "ROOTCA", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: []byte("root")}}}}},
	})
	return a
}

// eventSink serves PERF_EVENTS and hands each event to a channel.
func eventSink(t *testing.T, path string) <-chan event {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan event, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				ch <- e
			}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return ch
}

// log keeps every event received, so a test can wait for one in any order.
type log struct {
	ch   <-chan event
	seen []event
	used map[int]bool
}

// next returns the first event not returned before that matches, waiting for it if needed.
func (l *log) next(t *testing.T, ctx context.Context, match func(event) bool, what string) event {
	t.Helper()
	if l.used == nil {
		l.used = map[int]bool{}
	}
	for i := 0; ; i++ {
		for ; i < len(l.seen); i++ {
			if !l.used[i] && match(l.seen[i]) {
				l.used[i] = true
				return l.seen[i]
			}
		}
		select {
		case e := <-l.ch:
			l.seen = append(l.seen, e)
			i--
		case <-ctx.Done():
			t.Fatalf("no %s event; events: %+v", what, l.seen)
		}
		i = -1
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStubAgainstRealServers(t *testing.T) {
	for _, api := range []string{"GRPC", "DELTA_GRPC"} {
		t.Run(api, func(t *testing.T) {
			dir := t.TempDir()
			xdsPath, sdsPath := filepath.Join(dir, "xds.sock"), filepath.Join(dir, "sds.sock")
			a := startAgent(t, xdsPath, sdsPath)
			admin := freePort(t)
			pipe := func(name, path string) string {
				return fmt.Sprintf(`{"name":%q,"load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":%q}}}}]}]}}`, name, path)
			}
			bs := fmt.Sprintf(`{"node":{"id":"sidecar~1.2.3.4~a.ns~ns.svc.cluster.local"},"admin":{"address":{"socket_address":{"port_value":%d}}},`+
				`"dynamic_resources":{"ads_config":{"api_type":%q}},"static_resources":{"clusters":[%s,%s]}}`,
				admin, api, pipe("xds-grpc", xdsPath), pipe("sds-grpc", sdsPath))
			bsPath := filepath.Join(dir, "envoy-rev.json")
			if err := os.WriteFile(bsPath, []byte(bs), 0o644); err != nil {
				t.Fatal(err)
			}
			events := &log{ch: eventSink(t, filepath.Join(dir, "ev.sock"))}
			t.Setenv("PERF_EVENTS", "unix:"+filepath.Join(dir, "ev.sock"))
			t.Setenv("PERF_NACK_PREFIX", "cds-2")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			rctx, stop := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- run(rctx, []string{"-c", bsPath, "--drain-time-s", "1"}) }()

			c := events.next(t, ctx, func(e event) bool { return e.Ev == "push" && e.Type == clusterType }, "clusters")
			if c.Version != "cds-1" || c.ID != "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local" || c.Bytes == 0 {
				t.Errorf("clusters event %+v", c)
			}
			events.next(t, ctx, func(e event) bool { return e.Ev == "push" && e.Type == listenerType }, "listeners")
			seen := map[string]bool{}
			for len(seen) < 2 {
				e := events.next(t, ctx, func(e event) bool { return e.Ev == "sds" }, "secret")
				seen[e.Name] = true
			}
			if !seen["default"] || !seen["ROOTCA"] {
				t.Errorf("secrets received: %v", seen)
			}
			if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/stats?usedonly", admin)); code != 200 ||
				!strings.Contains(body, "cluster_manager.cds.update_success: 1") || !strings.Contains(body, "server.state: 0") {
				t.Errorf("/stats = %d %q", code, body)
			}
			if code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/ready", admin)); code != 200 {
				t.Errorf("/ready = %d once configured", code)
			}

			// A version the stand-in was told to reject is NACKed, as Envoy does.
			a.caches[clusterType].SetResources(map[string]types.Resource{"c2": &cluster.Cluster{Name: "c2"}})
			if e := events.next(t, ctx, func(e event) bool { return e.Type == clusterType }, "second clusters"); e.Ev != "nack" || e.Version != "cds-2" {
				t.Errorf("rejected push gave event %+v, want a nack of cds-2", e)
			}
			select {
			case msg := <-a.nacks:
				if !strings.Contains(msg, "cds-2") {
					t.Errorf("NACK detail %q", msg)
				}
			case <-ctx.Done():
				t.Fatal("the server saw no NACK")
			}
			if _, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/stats", admin)); !strings.Contains(body, "cluster_manager.cds.update_rejected: 1") {
				t.Errorf("/stats after a NACK: %q", body)
			}
			stop()
			if err := <-errc; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
}

func TestQuitQuitQuitEndsTheStub(t *testing.T) {
	dir := t.TempDir()
	xdsPath := filepath.Join(dir, "xds.sock")
	startAgent(t, xdsPath, filepath.Join(dir, "sds.sock"))
	admin := freePort(t)
	bs := fmt.Sprintf(`{"admin":{"address":{"socket_address":{"port_value":%d}}},"static_resources":{"clusters":[`+
		`{"name":"xds-grpc","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":%q}}}}]}]}}]}}`, admin, xdsPath)
	bsPath := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bsPath, []byte(bs), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PERF_EVENTS", filepath.Join(dir, "events.jsonl"))
	errc := make(chan error, 1)
	go func() { errc <- run(t.Context(), []string{"-c", bsPath}) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/quitquitquit", admin), "", nil)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the port to open, not for correctness
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("run after quitquitquit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stub did not exit after /quitquitquit")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if !strings.Contains(string(b), `"ev":"start"`) || !strings.Contains(string(b), `"ev":"exit"`) {
		t.Errorf("events file %q lacks start and exit", b)
	}
}

package gcetoken

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock/clocktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"aud":"cluster.local","exp":%d}`, exp.Unix()))) + ".sig"
}

// metadataServer stands in for the GCE metadata server: it serves the identity endpoint only to
// requests carrying Metadata-Flavor: Google, as the real one does.
type metadataServer struct {
	*httptest.Server
	mu      sync.Mutex
	tokens  []string // served in order; the last one repeats
	fails   int      // answer 503 this many times first
	hits    atomic.Int32
	queries []string
}

func newMetadataServer(t *testing.T, tokens ...string) *metadataServer {
	ms := &metadataServer{tokens: tokens}
	ms.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
			return
		}
		if r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/identity" {
			http.NotFound(w, r)
			return
		}
		ms.mu.Lock()
		defer ms.mu.Unlock()
		ms.hits.Add(1)
		ms.queries = append(ms.queries, r.URL.RawQuery)
		if ms.fails > 0 {
			ms.fails--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		tok := ms.tokens[0]
		if len(ms.tokens) > 1 {
			ms.tokens = ms.tokens[1:]
		}
		fmt.Fprint(w, tok)
	}))
	t.Cleanup(ms.Close)
	return ms
}

func (ms *metadataServer) host() string { return strings.TrimPrefix(ms.URL, "http://") }

func TestFetchWritesTokenFile(t *testing.T) {
	tok := jwt(time.Now().Add(time.Hour))
	ms := newMetadataServer(t, tok)
	path := filepath.Join(t.TempDir(), "var/run/secrets/tokens/istio-token")
	f, err := New(Config{MetadataHost: ms.host(), Audience: "example.org", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != tok {
		t.Fatalf("token file = %q, %v; want the served token", got, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 (Istio's)", st.Mode().Perm())
	}
	if q := ms.queries[0]; q != "audience=example.org&format=full" {
		t.Errorf("query %q, want the trust domain as audience and format=full", q)
	}
	if f.due(time.Now()) {
		t.Error("a token valid for an hour is due right away; want due only within 25 minutes of expiry")
	}
	if !f.due(time.Now().Add(36 * time.Minute)) {
		t.Error("not due 24 minutes before expiry")
	}
}

func TestFetchErrors(t *testing.T) {
	for name, handler := range map[string]http.HandlerFunc{
		"status": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusNotFound) },
		"empty":  func(w http.ResponseWriter, r *http.Request) {},
		"huge":   func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, maxTokenBytes+10)) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(handler)
			defer srv.Close()
			path := filepath.Join(t.TempDir(), "token")
			f, _ := New(Config{MetadataHost: strings.TrimPrefix(srv.URL, "http://"), Audience: "td", Path: path})
			err := f.Fetch(context.Background())
			if err == nil || !strings.Contains(err.Error(), "metadata server") {
				t.Fatalf("err = %v, want an error naming the metadata server", err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("token file written after a failed fetch: %v", err)
			}
		})
	}
}

func TestRunRefreshesBeforeExpiryAndRetries(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	first := jwt(now.Add(20 * time.Minute)) // already inside the 25-minute grace: refreshed at the next check
	second := jwt(now.Add(2 * time.Hour))
	ms := newMetadataServer(t, first, second)
	ms.fails = 2 // the first two answers fail: Run must retry, not wait a whole check interval
	path := filepath.Join(t.TempDir(), "token")
	clk := clocktest.NewFake(now)
	const interval = time.Minute
	f, _ := New(Config{MetadataHost: ms.host(), Audience: "td", Path: path, CheckInterval: interval, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// step waits until Run waits on its timer, checks the requests made so far, and moves the
	// clock by d (the timer fires when d reaches it).
	step := func(wantHits int32, d time.Duration) {
		t.Helper()
		clk.WaitTimers(t, 1)
		if h := ms.hits.Load(); h != wantHits {
			t.Fatalf("%d requests to the metadata server, want %d", h, wantHits)
		}
		clk.Advance(d)
	}
	step(1, time.Second)   // failed; retried after 1 s, not a check interval
	step(2, 2*time.Second) // failed again; the backoff doubles
	step(3, interval)      // the near-expiry token; due at the next check
	clk.WaitTimers(t, 1)   // its refresh fetched and written
	if b, err := os.ReadFile(path); err != nil || string(b) != second {
		t.Fatalf("token file after the refresh: %q, %v; want the second token", b, err)
	}
	// A fresh token is not fetched again at the checks before its grace begins (expiry 2 h,
	// grace 25 min: due after 1h35m; the checks fall at 1m03s + k minutes).
	for range 94 {
		step(4, interval) // the last of these moves the clock to 1h35m03s
	}
	step(5, interval) // inside the grace now: fetched again
}

func TestExpiry(t *testing.T) {
	exp := time.Unix(1900000000, 0)
	if got, err := Expiry(jwt(exp)); err != nil || !got.Equal(exp) {
		t.Fatalf("Expiry = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a.b", "a.!!!.c", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".c",
		"a." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":"x"}`)) + ".c"} {
		if _, err := Expiry(bad); err == nil {
			t.Errorf("Expiry(%q) succeeded", bad)
		}
	}
}

func FuzzExpiry(f *testing.F) {
	f.Add(jwt(time.Unix(1900000000, 0)))
	f.Add("a.e30.c")
	f.Fuzz(func(t *testing.T, s string) {
		if exp, err := Expiry(s); err == nil && exp.Unix() <= 0 {
			t.Fatalf("Expiry(%q) = %v without error", s, exp)
		}
	})
}

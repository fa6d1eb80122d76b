package metric

import (
	"bufio"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

func text(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestTextFormat(t *testing.T) {
	r := NewRegistry()
	p := r.WithPrefix("istio_agent_")
	p.Counter("num_outgoing_requests", "Outgoing requests to the CA.", "request_type", "csr").Add(3)
	v := r.CounterVec("istio_agent_envoy_connection_terminations", "Client streams that ended.", "type")
	v.With("cancel").Inc()
	v.With("error").Add(2)
	v.With("cancel").Inc()
	p.Gauge("startup_duration_seconds", "Line one\nwith \\ backslash.").Set(0.25)
	h := r.Histogram("istio_agent_dns_upstream_request_duration_seconds", "Time.", []float64{.001, .01, 1})
	for _, x := range []float64{0.0005, 0.001, 0.5, 3} {
		h.Observe(x)
	}
	p.Func("cert_expiry_seconds", "Seconds until expiry.", TypeGauge, func(emit func(Sample)) {
		emit(Sample{Value: 1e6, Labels: []string{"resource_name", `def"ault`}})
	})
	p.Func("empty", "Produces nothing.", TypeGauge, func(func(Sample)) {})
	p.Counter("unused_total", "Never incremented: still written, at 0.")
	want := `# HELP istio_agent_cert_expiry_seconds Seconds until expiry.
# TYPE istio_agent_cert_expiry_seconds gauge
istio_agent_cert_expiry_seconds{resource_name="def\"ault"} 1e+06
# HELP istio_agent_dns_upstream_request_duration_seconds Time.
# TYPE istio_agent_dns_upstream_request_duration_seconds histogram
istio_agent_dns_upstream_request_duration_seconds_bucket{le="0.001"} 2
istio_agent_dns_upstream_request_duration_seconds_bucket{le="0.01"} 2
istio_agent_dns_upstream_request_duration_seconds_bucket{le="1"} 3
istio_agent_dns_upstream_request_duration_seconds_bucket{le="+Inf"} 4
istio_agent_dns_upstream_request_duration_seconds_sum 3.5015
istio_agent_dns_upstream_request_duration_seconds_count 4
# HELP istio_agent_envoy_connection_terminations Client streams that ended.
# TYPE istio_agent_envoy_connection_terminations counter
istio_agent_envoy_connection_terminations{type="cancel"} 2
istio_agent_envoy_connection_terminations{type="error"} 2
# HELP istio_agent_num_outgoing_requests Outgoing requests to the CA.
# TYPE istio_agent_num_outgoing_requests counter
istio_agent_num_outgoing_requests{request_type="csr"} 3
# HELP istio_agent_startup_duration_seconds Line one\nwith \\ backslash.
# TYPE istio_agent_startup_duration_seconds gauge
istio_agent_startup_duration_seconds 0.25
# HELP istio_agent_unused_total Never incremented: still written, at 0.
# TYPE istio_agent_unused_total counter
istio_agent_unused_total 0
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGetOrCreate(t *testing.T) {
	r := NewRegistry()
	a := r.Counter("x_total", "X.", "k", "v")
	b := r.Counter("x_total", "X.", "k", "v")
	c := r.Counter("x_total", "X.", "k", "w")
	if a != b || a == c {
		t.Fatal("the same name and labels must give the same counter, other labels another")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a name registered as a counter was handed out as a gauge")
		}
	}()
	r.Gauge("x_total", "X.")
}

func TestNilRegistry(t *testing.T) {
	var r *Registry
	c := r.Counter("a", "A.")
	c.Inc()
	v := r.CounterVec("b", "B.", "type")
	v.With("x").Inc()
	v.With("x").Inc()
	r.Histogram("h", "H.", []float64{1}).Observe(2)
	r.Func("f", "F.", TypeGauge, nil)
	RegisterRuntime(r)
	if c.Value() != 1 || v.With("x").Value() != 2 || r.WithPrefix("p_") != nil || text(t, r) != "" {
		t.Fatal("a nil registry's metrics must work and export nothing")
	}
}

func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "C.")
	h := r.Histogram("h", "H.", []float64{1, 2})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.Add(0.5)
				h.Observe(float64(i % 3))
				_ = text(t, r)
			}
		})
	}
	wg.Wait()
	if c.Value() != 4000 || h.Count() != 8000 {
		t.Fatalf("counter %v, histogram count %d", c.Value(), h.Count())
	}
}

func TestInvalidNames(t *testing.T) {
	for _, f := range []func(){
		func() { NewRegistry().Counter("bad-name", "") },
		func() { NewRegistry().Counter("9lives", "") },
		func() { NewRegistry().Counter("ok", "", "bad label", "v") },
		func() { NewRegistry().Counter("ok", "", "odd") },
		func() { NewRegistry().CounterVec("ok", "", "__reserved") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("an invalid name or label list was accepted")
				}
			}()
			f()
		}()
	}
}

func TestFloatFormat(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1: "1", 0.1: "0.1", 1e21: "1e+21", 123456789: "1.23456789e+08",
		math.Inf(1): "+Inf", math.Inf(-1): "-Inf", -2.5: "-2.5"} {
		var b strings.Builder
		w := bufio.NewWriter(&b)
		writeFloat(w, v)
		w.Flush()
		if b.String() != want {
			t.Errorf("%v: %q, want %q", v, b.String(), want)
		}
	}
}

func TestRuntimeFamilies(t *testing.T) {
	r := NewRegistry()
	RegisterRuntime(r.WithPrefix("istio_agent_"))
	out := text(t, r)
	for _, want := range []string{
		"# TYPE istio_agent_go_goroutines gauge\nistio_agent_go_goroutines ",
		"istio_agent_go_info{version=\"go",
		"# TYPE istio_agent_go_gc_duration_seconds summary\nistio_agent_go_gc_duration_seconds{quantile=\"0\"} ",
		"istio_agent_go_gc_duration_seconds_count ",
		"# TYPE istio_agent_go_memstats_alloc_bytes_total counter\n",
		"istio_agent_go_memstats_heap_inuse_bytes ",
		"# TYPE istio_agent_process_cpu_seconds_total counter\n",
		"istio_agent_process_resident_memory_bytes ",
		"istio_agent_process_start_time_seconds ",
		"istio_agent_process_open_fds ",
		"istio_agent_process_max_fds ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "istio_agent_process_resident_memory_bytes ") && strings.HasSuffix(line, " 0") {
			t.Error("resident memory read as 0")
		}
		if strings.HasPrefix(line, "istio_agent_process_start_time_seconds ") && strings.HasSuffix(line, " 0") {
			t.Error("start time read as 0")
		}
	}
}

// TestRuntimeSettings checks that the GOGC, GOMEMLIMIT and GOMAXPROCS gauges follow the settings
// as runtime/debug and runtime set them (the values are this test's own).
func TestRuntimeSettings(t *testing.T) {
	r := NewRegistry()
	RegisterRuntime(r)
	defer debug.SetGCPercent(debug.SetGCPercent(37))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(123 << 20))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for name, want := range map[string]float64{"go_gc_gogc_percent": 37, "go_gc_gomemlimit_bytes": 123 << 20, "go_sched_gomaxprocs_threads": 3} {
		if v, ok := r.Value(name); !ok || v != want {
			t.Errorf("%s = %v (%t), want %v", name, v, ok, want)
		}
	}
	if p := debug.SetGCPercent(37); p != 37 {
		t.Errorf("scraping changed GOGC to %d", p)
	}
}

func TestValue(t *testing.T) {
	r := NewRegistry()
	r.WithPrefix("p_").Counter("c", "C.", "k", "v").Add(2)
	r.Gauge("g", "G.").Set(-1)
	r.Histogram("h", "H.", []float64{1}).Observe(3)
	r.Func("f", "F.", TypeGauge, func(emit func(Sample)) { emit(Sample{Value: 7, Labels: []string{"name", "default"}}) })
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		ok     bool
	}{
		{"p_c", []string{"k", "v"}, 2, true}, {"p_c", nil, 0, false}, {"c", []string{"k", "v"}, 0, false},
		{"g", nil, -1, true}, {"h", nil, 1, true}, {"f", []string{"name", "default"}, 7, true}, {"f", []string{"name", "x"}, 0, false},
	} {
		if v, ok := r.Value(tc.name, tc.labels...); v != tc.want || ok != tc.ok {
			t.Errorf("%s%v: %v %v, want %v %v", tc.name, tc.labels, v, ok, tc.want, tc.ok)
		}
	}
}

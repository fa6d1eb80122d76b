package metric

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RegisterRuntime registers the Go runtime's and the process's figures under client_golang's
// names (go_goroutines, go_memstats_*, go_gc_duration_seconds, process_cpu_seconds_total,
// process_resident_memory_bytes, ...), read at scrape time, so dashboards built on Istio's
// istio_agent_go_* and istio_agent_process_* series keep working.
func RegisterRuntime(r *Registry) {
	if r == nil {
		return
	}
	var ms memStats
	gauge := func(name, help string, f func() float64) {
		r.Func(name, help, TypeGauge, func(emit func(Sample)) { emit(Sample{Value: f()}) })
	}
	counter := func(name, help string, f func() float64) {
		r.Func(name, help, TypeCounter, func(emit func(Sample)) { emit(Sample{Value: f()}) })
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", func() float64 { return float64(runtime.NumGoroutine()) })
	gauge("go_threads", "Number of OS threads created.", func() float64 { n, _ := runtime.ThreadCreateProfile(nil); return float64(n) })
	// The three settings client_golang reads from runtime/metrics by default
	// (GoCollectorDefaultRuntimeMetrics in prometheus/internal/go_collector_options.go), read the
	// same way: reading them changes nothing and waits for nothing.
	gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", runtimeSetting("/sched/gomaxprocs:threads"))
	gauge("go_gc_gogc_percent", "Heap size target percentage configured by GOGC.", runtimeSetting("/gc/gogc:percent"))
	gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by GOMEMLIMIT.", runtimeSetting("/gc/gomemlimit:bytes"))
	r.Func("go_info", "Information about the Go environment.", TypeGauge, func(emit func(Sample)) {
		emit(Sample{Value: 1, Labels: []string{"version", runtime.Version()}})
	})
	r.Func("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", TypeSummary,
		func(emit func(Sample)) {
			var st debug.GCStats
			st.PauseQuantiles = make([]time.Duration, 5)
			debug.ReadGCStats(&st)
			for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
				emit(Sample{Value: st.PauseQuantiles[i].Seconds(), Labels: []string{"quantile", q}})
			}
			emit(Sample{Suffix: "_sum", Value: st.PauseTotal.Seconds()})
			emit(Sample{Suffix: "_count", Value: float64(st.NumGC)})
		})

	for _, m := range []struct {
		name, help string
		counter    bool
		f          func(*runtime.MemStats) uint64
	}{
		{"go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.", false, func(m *runtime.MemStats) uint64 { return m.Alloc }},
		{"go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", true, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
		{"go_memstats_sys_bytes", "Number of bytes obtained from system.", false, func(m *runtime.MemStats) uint64 { return m.Sys }},
		{"go_memstats_mallocs_total", "Total number of heap objects allocated.", true, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
		{"go_memstats_frees_total", "Total number of heap objects frees.", true, func(m *runtime.MemStats) uint64 { return m.Frees }},
		{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", false, func(m *runtime.MemStats) uint64 { return m.HeapAlloc }},
		{"go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system.", false, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
		{"go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used.", false, func(m *runtime.MemStats) uint64 { return m.HeapIdle }},
		{"go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", false, func(m *runtime.MemStats) uint64 { return m.HeapInuse }},
		{"go_memstats_heap_released_bytes", "Number of heap bytes released to OS.", false, func(m *runtime.MemStats) uint64 { return m.HeapReleased }},
		{"go_memstats_heap_objects", "Number of currently allocated objects.", false, func(m *runtime.MemStats) uint64 { return m.HeapObjects }},
		{"go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", false, func(m *runtime.MemStats) uint64 { return m.StackInuse }},
		{"go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", false, func(m *runtime.MemStats) uint64 { return m.StackSys }},
		{"go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures.", false, func(m *runtime.MemStats) uint64 { return m.MSpanInuse }},
		{"go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system.", false, func(m *runtime.MemStats) uint64 { return m.MSpanSys }},
		{"go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures.", false, func(m *runtime.MemStats) uint64 { return m.MCacheInuse }},
		{"go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system.", false, func(m *runtime.MemStats) uint64 { return m.MCacheSys }},
		{"go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table.", false, func(m *runtime.MemStats) uint64 { return m.BuckHashSys }},
		{"go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata.", false, func(m *runtime.MemStats) uint64 { return m.GCSys }},
		{"go_memstats_other_sys_bytes", "Number of bytes used for other system allocations.", false, func(m *runtime.MemStats) uint64 { return m.OtherSys }},
		{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", false, func(m *runtime.MemStats) uint64 { return m.NextGC }},
	} {
		f := m.f
		read := func() float64 { return float64(f(ms.read())) }
		if m.counter {
			counter(m.name, m.help, read)
		} else {
			gauge(m.name, m.help, read)
		}
	}
	gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", func() float64 {
		return float64(ms.read().LastGC) / 1e9
	})

	counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", func() float64 { return procStat().cpu })
	gauge("process_resident_memory_bytes", "Resident memory size in bytes.", func() float64 { return procStat().rss })
	gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", func() float64 { return procStat().vsize })
	gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", func() float64 { return procStat().start })
	gauge("process_open_fds", "Number of open file descriptors.", func() float64 {
		ents, _ := os.ReadDir("/proc/self/fd")
		return float64(len(ents))
	})
	gauge("process_max_fds", "Maximum number of open file descriptors.", func() float64 { return procLimit("Max open files") })
	counter("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", func() float64 { return netDev(1) })
	counter("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", func() float64 { return netDev(9) })
	gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", func() float64 { return procLimit("Max address space") })
}

// runtimeSetting returns a reader of one runtime/metrics value of kind uint64, as a float64 (as
// client_golang reports it: GOGC=off is the runtime's uint64 of -1); 0 if this Go does not know it.
func runtimeSetting(name string) func() float64 {
	return func() float64 {
		s := [1]metrics.Sample{{Name: name}}
		metrics.Read(s[:])
		if s[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return float64(s[0].Value.Uint64())
	}
}

// memStats reads runtime.MemStats at most once per scrape (ReadMemStats stops the world).
type memStats struct {
	mu   sync.Mutex
	at   time.Time
	last runtime.MemStats
}

func (m *memStats) read() *runtime.MemStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) > 100*time.Millisecond {
		runtime.ReadMemStats(&m.last)
		m.at = time.Now()
	}
	return &m.last
}

type stat struct{ cpu, rss, vsize, start float64 }

// clockTicks is USER_HZ, 100 on every Linux the agent runs on.
const clockTicks = 100

// procStat reads /proc/self/stat (zeros when unavailable).
func procStat() stat {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return stat{}
	}
	s := string(b)
	// The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 22 {
		return stat{}
	}
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k-3], 64); return v }
	return stat{
		cpu:   (num(14) + num(15)) / clockTicks,
		vsize: num(23),
		rss:   num(24) * float64(os.Getpagesize()),
		start: bootTime() + num(22)/clockTicks,
	}
}

var bootTime = sync.OnceValue(func() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			t, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return t
		}
	}
	return 0
})

// netDev sums one column of /proc/self/net/dev over every interface of the process's network
// namespace (column 1: bytes received, 9: bytes sent), as client_golang does.
func netDev(col int) float64 {
	b, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return 0
	}
	var sum float64
	for line := range strings.SplitSeq(string(b), "\n") {
		_, counters, ok := strings.Cut(line, ":")
		if !ok {
			continue // the two header lines have no colon
		}
		f := strings.Fields(counters)
		if len(f) < 16 {
			continue
		}
		v, _ := strconv.ParseFloat(f[col-1], 64)
		sum += v
	}
	return sum
}

// procLimit reads a soft limit from /proc/self/limits; "unlimited" is 2^64-1, as procfs reports.
func procLimit(name string) float64 {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			if f[0] == "unlimited" {
				return 18446744073709551615
			}
			v, _ := strconv.ParseFloat(f[0], 64)
			return v
		}
	}
	return 0
}

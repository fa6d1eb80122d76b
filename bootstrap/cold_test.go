package bootstrap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// coldEnv, when set in a child test process, names what TestColdRenderChild renders once.
const coldEnv = "WINGMAN_BOOTSTRAP_COLD_RENDER"

// TestColdRenderChild is the child half of BenchmarkRenderCold: in a fresh process (nothing
// marshalled yet, so every first-use cost is paid) it renders once and prints the wall time of
// that one render and the heap it left behind after a GC (caches built on first use). It is
// skipped unless the benchmark starts it.
func TestColdRenderChild(t *testing.T) {
	what := os.Getenv(coldEnv)
	if what == "" {
		t.Skip("child of BenchmarkRenderCold")
	}
	cfg := baseConfig(t)
	path := filepath.Join(t.TempDir(), "grpc-bootstrap.json")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var err error
	switch what {
	case "render":
		_, err = Render(t.Context(), cfg)
	case "grpc":
		err = WriteGRPCBootstrap(path, cfg, "")
	default:
		t.Fatalf("%s=%q: want render or grpc", coldEnv, what)
	}
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	fmt.Printf("cold ns=%d retained=%d\n", took.Nanoseconds(), int64(after.HeapAlloc)-int64(before.HeapAlloc))
}

// BenchmarkRenderCold measures the first render in a fresh process: each sample execs this test
// binary once (TestColdRenderChild) and reads back the wall time of its one render and the heap
// still held after it (first-use caches). Reported as medians over the samples; the ns/op of the
// benchmark itself is the exec and is meaningless.
func BenchmarkRenderCold(b *testing.B) {
	for _, what := range []string{"render", "grpc"} {
		b.Run(what, func(b *testing.B) {
			var took, kept []float64
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestColdRenderChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), coldEnv+"="+what)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				i := bytes.Index(out, []byte("cold ns="))
				if i < 0 {
					b.Fatalf("child printed no sample:\n%s", out)
				}
				var ns, heap float64
				if _, err := fmt.Sscanf(string(out[i:]), "cold ns=%g retained=%g", &ns, &heap); err != nil {
					b.Fatalf("child output %q: %v", out[i:], err)
				}
				took, kept = append(took, ns), append(kept, heap)
			}
			b.ReportMetric(median(took), "first-ns")
			b.ReportMetric(median(kept), "retained-B")
		})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

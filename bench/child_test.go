package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/mux"
)

// childEnv switches the test binary into a proxy-only child process, so that its heap and its
// allocation counters hold nothing but the proxy's: the raw-frame client and upstream that drive
// it (process-wide counts included them, and with cut-through their HTTP/2 framing moves with
// timing) stay in the parent.
const childEnv = "WINGMAN_BENCH_PROXY_CHILD"

func init() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
}

// runChild serves the proxy (spec is "upstream|socket") and samples its live heap every 100µs.
// On standard input, "mark" starts counting allocations (after a collection) and answers "ok";
// "report" prints "idle peak mallocs bytes": heap bytes at start and at most, and the
// allocations and bytes allocated since the mark.
func runChild(spec string) int {
	upstream, sock, _ := strings.Cut(spec, "|")
	p, err := mux.New(mux.Config{SocketPath: sock, Upstream: mux.UpstreamConfig{Address: upstream, Plaintext: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := mux.Listen(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, l)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	idle := read()
	peak := make(chan uint64)
	stop := make(chan struct{})
	go func() {
		var max uint64
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if v := read(); v > max {
					max = v
				}
			case <-stop:
				peak <- max
				return
			}
		}
	}()
	var mark runtime.MemStats
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "mark":
			runtime.GC()
			runtime.ReadMemStats(&mark)
			fmt.Println("ok")
		case "report":
			var now runtime.MemStats
			runtime.ReadMemStats(&now)
			close(stop)
			fmt.Printf("%d %d %d %d\n", idle, <-peak, now.Mallocs-mark.Mallocs, now.TotalAlloc-mark.TotalAlloc)
			return 0
		}
	}
	return 1
}

// childProxy is a proxy in a child process in front of a ping-pong upstream answering resp.
type childProxy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	sock  string
}

func startChild(t *testing.T, resp []byte) *childProxy {
	t.Helper()
	upstream := pingPong(t, resp)
	sock := filepath.Join(t.TempDir(), "XDS")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+upstream+"|"+sock)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child proxy did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &childProxy{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), sock: sock}
}

func (c *childProxy) mark(t *testing.T) {
	fmt.Fprintln(c.stdin, "mark")
	if line, err := c.out.ReadString('\n'); err != nil || line != "ok\n" {
		t.Fatalf("child mark: %q, %v", line, err)
	}
}

// report ends the child and returns its heap at idle and at most, and its allocations and
// bytes allocated since the mark.
func (c *childProxy) report(t *testing.T) (idle, peak, mallocs, bytes uint64) {
	fmt.Fprintln(c.stdin, "report")
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("child report: %v", err)
	}
	if _, err := fmt.Sscan(line, &idle, &peak, &mallocs, &bytes); err != nil {
		t.Fatalf("child output %q: %v", line, err)
	}
	return idle, peak, mallocs, bytes
}

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/controlplane"
	"github.com/wingman-mesh/wingman/lab/netem"
	"github.com/wingman-mesh/wingman/lab/testca"
	"github.com/wingman-mesh/wingman/perf"
)

// Ports inside the pod namespace (a fresh namespace per rig, so fixed ports are free).
const (
	statusPort = 15020
	adminPort  = 15000
	podID      = "fault"
)

// Rig is one scenario's world: the namespaces and link, the control plane serving in C, and the
// agent (with the stand-in it runs) in A. Its methods are safe for concurrent use.
type Rig struct {
	Net  *netem.Pair
	CP   *controlplane.Server
	Hub  *perf.Hub
	Dir  string
	Addr string // the control plane's address as the agent dials it (in C)

	agent *exec.Cmd
	done  chan struct{} // closed when the agent has been waited for
	out   *perf.TailBuffer
	http  *http.Client // dials from A (the status port is loopback-only)

	mu      sync.Mutex // guards the fields below
	cancel  context.CancelFunc
	served  chan error
	maxSend time.Duration // longest single SendMsg of an xDS response by the control plane
	sends   int
	pushes  uint64 // SetResources calls on the clusters cache: its version counter

	resetErrs []string // the stand-in's ADS errors, collected by the test (one goroutine)
	tmpfs     string   // the tmpfs mounted on the proxy directory, if any (restart.go)
}

// RigConfig configures NewRig.
type RigConfig struct {
	Bins perf.Bins
	Env  []string // extra agent environment (GRPC_KEEPALIVE_INTERVAL, ...)
	// ProxyTmpfs mounts a tmpfs on the agent's ./etc/istio/proxy, as Istio's injection makes
	// the istio-envoy volume a memory-backed emptyDir (restart.go).
	ProxyTmpfs bool
	// Serve, when set, fills the control plane's caches further before the agent first starts
	// (go-control-plane answers a subscription of an empty cache with nothing the agent ACKs,
	// and then holds later pushes of that type back).
	Serve func(cp *controlplane.Server)
	// Callbacks, when set, see the control plane's streams (go-control-plane's events).
	Callbacks serverv3.Callbacks
}

// NewRig builds the namespaces, starts the control plane in C and the agent in A, pushes the
// initial clusters and listeners and waits until the stand-in has them and its certificate.
func NewRig(ctx context.Context, cfg RigConfig) (_ *Rig, err error) {
	dir, err := os.MkdirTemp("", "wf")
	if err != nil {
		return nil, err
	}
	r := &Rig{Dir: dir, done: make(chan struct{}), out: &perf.TailBuffer{Max: 16 << 10}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.Net, err = netem.New("wf"); err != nil {
		return r, err
	}
	r.http = &http.Client{Transport: &http.Transport{DialContext: netem.Dialer(r.Net.A), DisableKeepAlives: true}}
	if r.Hub, err = perf.NewHub(filepath.Join(dir, "ev.sock")); err != nil {
		return r, err
	}
	ca, err := testca.New(testca.Config{Token: perf.Token})
	if err != nil {
		return r, err
	}
	// NDS is served too: an agent with DNS capture subscribes it (last_state sets a table).
	r.CP, err = controlplane.New(controlplane.Config{Token: perf.Token, Types: []string{perf.ClusterType, perf.ListenerType, fastpath.NameTableType},
		VersionPrefixes: true, CA: ca, StreamInterceptor: r.timeSends, Callbacks: cfg.Callbacks})
	if err != nil {
		return r, err
	}
	l, err := netem.Listen(r.Net.C, "tcp", netem.AddrC+":0")
	if err != nil {
		return r, err
	}
	r.Addr = l.Addr().String()
	r.serve(l, 0)
	r.Push(10, 10<<10, "init")
	r.CP.Cache(perf.ListenerType).SetResources(perf.Listeners(2))
	if cfg.Serve != nil {
		cfg.Serve(r.CP)
	}
	if cfg.ProxyTmpfs {
		if err := r.mountProxyTmpfs(); err != nil { // restart.go
			return r, err
		}
	}
	if err := r.startAgent(cfg); err != nil {
		return r, err
	}
	if _, err := r.Hub.Wait(ctx, 0, "first listeners", func(e perf.Event) bool { return e.Ev == "push" && e.Type == perf.ListenerType }); err != nil {
		return r, r.wrap(err)
	}
	if _, err := r.Hub.Wait(ctx, 0, "first certificate", func(e perf.Event) bool { return e.Ev == "sds" && e.Name == "default" }); err != nil {
		return r, r.wrap(err)
	}
	return r, nil
}

// serve serves the control plane on l in the background; grace above zero makes its stop a
// GOAWAY first.
func (r *Rig) serve(l net.Listener, grace time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if grace > 0 {
			done <- r.CP.ServeGraceful(ctx, l, grace)
		} else {
			done <- r.CP.Serve(ctx, l)
		}
	}()
	r.mu.Lock()
	r.cancel, r.served = cancel, done
	r.mu.Unlock()
}

// StopCP stops the control plane (as Istiod's process ending: every connection closed, or
// GOAWAY first when it was served with a grace) and waits for it.
func (r *Rig) StopCP() {
	r.mu.Lock()
	cancel, done := r.cancel, r.served
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// ServeCP serves the control plane again on its address (in C); grace as in serve.
func (r *Rig) ServeCP(grace time.Duration) error {
	l, err := r.ListenC()
	if err != nil {
		return err
	}
	r.serve(l, grace)
	return nil
}

// ListenC listens on the control plane's address in C (a port just freed may take a moment to
// bind again: it retries for up to two seconds).
func (r *Rig) ListenC() (net.Listener, error) {
	var l net.Listener
	var err error
	for range 100 {
		if l, err = netem.Listen(r.Net.C, "tcp", r.Addr); err == nil {
			return l, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

func (r *Rig) timeSends(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, timedStream{ss, r})
}

type timedStream struct {
	grpc.ServerStream
	r *Rig
}

func (s timedStream) SendMsg(m any) error {
	t0 := time.Now()
	err := s.ServerStream.SendMsg(m)
	d := time.Since(t0)
	s.r.mu.Lock()
	s.r.maxSend = max(s.r.maxSend, d)
	s.r.sends++
	s.r.mu.Unlock()
	return err
}

// MaxSend returns the longest the control plane has spent in one send of an xDS response and
// how many it made, and starts a new measurement.
func (r *Rig) MaxSend() (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, n := r.maxSend, r.sends
	r.maxSend, r.sends = 0, 0
	return d, n
}

// Push replaces the clusters with n clusters of about size bytes in all and returns the
// version the stand-in will report.
func (r *Rig) Push(n, size int, tag string) string {
	return r.PushClusters(perf.Clusters(n, size, tag))
}

// PushClusters replaces the clusters with res and returns the version the stand-in will report.
func (r *Rig) PushClusters(res map[string]types.Resource) string {
	r.mu.Lock()
	defer r.mu.Unlock() // held so versions and updates stay in order
	r.CP.Cache(perf.ClusterType).SetResources(res)
	r.pushes++
	return "cds-" + strconv.FormatUint(r.pushes, 10)
}

// Version is the number in a version the stand-in reports (cds-7 → 7), or -1.
func Version(v string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(v, "cds-"))
	if err != nil || !strings.HasPrefix(v, "cds-") {
		return -1
	}
	return n
}

func (r *Rig) startAgent(cfg RigConfig) error {
	for f, b := range map[string][]byte{"var/run/secrets/tokens/istio-token": []byte(perf.Token + "\n"), "var/run/secrets/istio/root-cert.pem": r.CP.RootPEM()} {
		path := filepath.Join(r.Dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	pc, _ := json.Marshal(map[string]any{"binaryPath": cfg.Bins.Stub, "proxyAdminPort": adminPort, "statusPort": statusPort,
		"discoveryAddress": r.Addr, "drainDuration": "1s", "terminationDrainDuration": "1s"})
	env := append([]string{"PROXY_CONFIG=" + string(pc), "POD_NAME=" + podID, "POD_NAMESPACE=default",
		"SERVICE_ACCOUNT=perf", "INSTANCE_IP=" + netem.AddrA, "CLOUD_PLATFORM=none", "CA_ADDR=" + r.Addr,
		"ISTIOD_SAN=" + perf.IstiodName, "ISTIO_META_CLUSTER_ID=Kubernetes", "ECC_SIGNATURE_ALGORITHM=ECDSA",
		"ISTIO_DELTA_XDS=true", "PATH=" + os.Getenv("PATH"),
		"PERF_EVENTS=" + r.Hub.Spec(), "PERF_STUB_ID=" + podID}, cfg.Env...)
	// ip netns exec execs the agent in place, so the pid is the agent's.
	cmd := exec.Command("ip", "netns", "exec", r.Net.A, cfg.Bins.Agent, "proxy", "sidecar")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.Dir, env, r.out, r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the thread that forked the agent ends, not the process (prctl(2)):
	// netem.Do ends every thread it entered a namespace on, and that could be the forking thread,
	// killing the agent mid-scenario (the likely cause of one last_state run in 14 whose agent's
	// pid was gone after readiness). The forking goroutine keeps its thread locked, so no other
	// goroutine runs on it, until the agent has been waited for.
	started := make(chan error, 1)
	done := r.done
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start pilot-agent: %w", err)
	}
	r.agent = cmd
	return nil
}

// Pid is the agent's process id.
func (r *Rig) Pid() int { return r.agent.Process.Pid }

// StubPid is the stand-in's process id (the agent's child).
func (r *Rig) StubPid() (int, error) {
	// Children are listed per thread: the agent forks from whichever thread runs exec.
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", r.Pid()))
	if err != nil {
		return 0, err
	}
	var f []string
	var b []byte
	for _, p := range paths {
		c, err := os.ReadFile(p)
		if err != nil {
			continue // the thread has exited
		}
		b = append(b, c...)
		f = append(f, strings.Fields(string(c))...)
	}
	if len(f) != 1 {
		return 0, fmt.Errorf("the agent has %d children (%q), want the stand-in alone", len(f), b)
	}
	return strconv.Atoi(f[0])
}

// Exited reports whether the agent has exited.
func (r *Rig) Exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wrap adds the agent's last output to err.
func (r *Rig) wrap(err error) error {
	return fmt.Errorf("%w\nagent exited: %v; last output:\n%s", err, r.Exited(), r.out.Last(12))
}

// Reading is one sample of the agent's resources.
type Reading struct {
	AnonKB, PssKB int64
	FDs           int
	Goroutines    int   // from /debug/pprof/goroutine on the status port
	HeapInuse     int64 // bytes, from the runtime.MemStats of /debug/pprof/heap?debug=1
	HeapAlloc     int64 // bytes; right after a GC (Read with gc) the live heap
	// Retained is HeapIdle − HeapReleased: free heap the runtime keeps mapped and resident
	// rather than returning it to the kernel (bytes).
	Retained int64
	// Mapped is Sys − HeapReleased: everything the Go runtime holds from the kernel (heap,
	// stacks, its own metadata), less the pages it has returned (bytes).
	Mapped int64
}

// Read samples the agent: RssAnon and PSS from /proc (smaps_rollup), open fds, and goroutines
// and heap from the agent's pprof on its status port; gc has pprof run a GC first, so that
// HeapAlloc is the live heap.
func (r *Rig) Read(ctx context.Context, gc bool) (Reading, error) {
	var rd Reading
	u, err := perf.ReadUsage(r.Pid())
	if err != nil {
		return rd, err
	}
	rd.AnonKB, rd.PssKB = u.AnonKB, u.PssKB
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", r.Pid()))
	if err != nil {
		return rd, err
	}
	rd.FDs = len(fds)
	body, err := r.get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return rd, err
	}
	first, _, _ := strings.Cut(body, "\n")
	if _, err := fmt.Sscanf(first, "goroutine profile: total %d", &rd.Goroutines); err != nil {
		return rd, fmt.Errorf("goroutine profile: %q: %w", first, err)
	}
	heap := "/debug/pprof/heap?debug=1"
	if gc {
		heap += "&gc=1"
	}
	if body, err = r.get(ctx, heap); err != nil {
		return rd, err
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			rd.HeapInuse, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			rd.HeapAlloc, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapIdle = "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			rd.Retained += n
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapReleased = "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			rd.Retained -= n
			rd.Mapped -= n
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# Sys = "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			rd.Mapped += n
		}
	}
	return rd, nil
}

func (r *Rig) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(statusPort)+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("agent status port %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("agent status port %s: %s", path, resp.Status)
	}
	return string(b), err
}

// XDSSocket is the agent's Envoy-facing xDS socket.
func (r *Rig) XDSSocket() string { return filepath.Join(r.Dir, "etc/istio/proxy/XDS") }

// Close stops the agent (SIGTERM, then SIGKILL to its group), the control plane, the hub and
// the link, and removes the directory.
func (r *Rig) Close() {
	if r.agent != nil {
		pg := r.agent.Process.Pid
		_ = syscall.Kill(-pg, syscall.SIGTERM)
		t := time.NewTimer(5 * time.Second)
		select {
		case <-r.done:
		case <-t.C:
		}
		t.Stop()
		_ = syscall.Kill(-pg, syscall.SIGKILL)
		<-r.done
	}
	if r.CP != nil {
		r.StopCP()
	}
	if r.Hub != nil {
		r.Hub.Close()
	}
	if r.http != nil {
		r.http.CloseIdleConnections()
	}
	if r.Net != nil {
		r.Net.Close()
	}
	r.unmountProxyTmpfs() // restart.go
	os.RemoveAll(r.Dir)
}

func (r *Rig) Output() string { return r.out.Last(40) }

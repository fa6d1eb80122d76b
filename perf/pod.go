package perf

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Kind names an agent under test.
type Kind string

const (
	// Wingman is the real pilot-agent binary (Bins.Agent), or Wingman's mux in lab/agentchild
	// when no binary is given.
	Wingman Kind = "wingman"
	// Reference is lab/refagent in lab/agentchild: decode and re-encode, a connection per stream.
	Reference Kind = "reference"
	// Direct is no agent: the stand-in talks to the control plane's plaintext port.
	Direct Kind = "direct"
	// Floor is lab/floorfwd: TLS from the control plane, HTTP/2 DATA copied to the stand-in's
	// Unix socket, nothing else; the process floor the agent's CPU per MB is read against.
	Floor Kind = "floor"
)

// Bins are the executables the harness runs.
type Bins struct {
	Agent string // pilot-agent; empty → Wingman runs as agentchild -mode=mux
	Child string // lab/agentchild
	Stub  string // lab/envoystub
	Floor string // lab/floorfwd
}

// Paths inside a pod directory, as in the proxyv2 image.
const (
	tokenFile     = "var/run/secrets/tokens/istio-token"
	rootFile      = "var/run/secrets/istio/root-cert.pem"
	bootstrapFile = "etc/istio/proxy/envoy-rev.json"
	xdsSocketRel  = "./etc/istio/proxy/XDS"
	sdsSocketRel  = "./var/run/secrets/workload-spiffe-uds/socket"
)

// imageTemplate is the bootstrap template every binary pod carries where the proxyv2 image has
// Istio's (imageTemplateRel, bootstrap.DefaultTemplatePath): Wingman's own, every parameter of
// Istio's set used (bootstrap/testdata/every_param.tmpl.json, which the bootstrap tests validate
// against Envoy's schema) plus inline headers, watchdogs and certificate providers written with
// ranges and conditions, 26 KB against the 27 KB of Istio's 1.30 envoy_bootstrap.json, so that
// the start-up render and what it leaves behind are a user's.
//
//go:embed testdata/envoy_bootstrap_tmpl.json
var imageTemplate []byte

const imageTemplateRel = "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"

// podSpec is how one pod is started.
type podSpec struct {
	kind      Kind
	id        string
	api       string        // GRPC or DELTA_GRPC
	secretTTL time.Duration // 0 → 24h
	slowMS    int
	extra     int    // downstreams beyond the first (started by the harness on the agent's socket)
	pprof     bool   // serve pprof/expvar from the agent child (or the binary's status port)
	cpuProf   string // agentchild writes a CPU profile of its whole run here
	rsaKeys   bool   // the pilot-agent binary makes RSA-2048 keys (Istio's default), not ECDSA
	quick     bool   // started only to be timed and killed: no profiles
	pushProf  bool   // the scenario takes the binary's CPU profile over its pushes itself
}

// Pod is one agent with its Envoy stand-ins.
type Pod struct {
	ID        string
	Dir       string
	Agent     *Proc
	Stubs     []*Proc  // stand-ins started by the harness (all of them in child mode)
	StubIDs   []string // every stand-in's id
	DebugAddr string   // host:port serving /debug/pprof (and /debug/vars for agentchild)
	Binary    bool     // the agent is the real pilot-agent
	Started   time.Time
	killed    atomic.Bool // stopped on purpose mid-scenario (env.kill): its exit is no failure
}

// nextPort hands out ports below the kernel's ephemeral range (32768 up by default), so that
// no outgoing connection of another pod takes a port between its choice and its use. Atomic.
var nextPort atomic.Int32

const (
	firstPort = 20000
	lastPort  = 32000
)

// freePort returns a port that is free on every interface now and that this process has not
// handed out before (wrapping around after lastPort).
func freePort() (int, error) {
	for range lastPort - firstPort {
		n := int(nextPort.Add(1)) % (lastPort - firstPort)
		port := firstPort + n
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d)", firstPort, lastPort)
}

// startPod lays out a pod directory under root, starts the agent and its stand-ins.
func startPod(ctx context.Context, root string, bins Bins, cp *ControlPlane, hub *Hub, spec podSpec) (*Pod, error) {
	dir := filepath.Join(root, spec.id)
	p := &Pod{ID: spec.id, Dir: dir}
	for f, b := range map[string][]byte{tokenFile: []byte(Token + "\n"), rootFile: cp.RootPEM} {
		path := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	stubEnv := []string{"PERF_EVENTS=" + hub.Spec(), "PERF_STUB_ID=" + spec.id}
	if spec.slowMS > 0 {
		stubEnv = append(stubEnv, "PERF_SLOW_MS="+strconv.Itoa(spec.slowMS))
	}
	ttl := spec.secretTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	p.StubIDs = []string{spec.id}
	p.Started = time.Now()
	if spec.kind == Direct {
		if err := writeBootstrap(filepath.Join(dir, bootstrapFile), spec.id, spec.api, admin); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		stub, err := startProc("envoystub(direct) "+spec.id, dir, append(stubEnv, "PERF_XDS_ADDR="+cp.PlainAddr()),
			bins.Stub, "-c", bootstrapFile)
		if err != nil {
			return nil, err
		}
		p.Stubs = append(p.Stubs, stub)
		return p, nil
	}
	if spec.kind == Floor {
		if err := startFloor(ctx, p, dir, bins, cp, spec, admin, stubEnv); err != nil {
			return nil, err
		}
		return p, nil
	}
	if bins.Agent != "" && spec.kind == Wingman {
		p.Binary = true
		// The image's template at Istio's path, which the binary renders as a user's would.
		tmpl := filepath.Join(dir, imageTemplateRel)
		if err := os.MkdirAll(filepath.Dir(tmpl), 0o755); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		if err := os.WriteFile(tmpl, imageTemplate, 0o644); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		status, err := freePort()
		if err != nil {
			return nil, err
		}
		pc, _ := json.Marshal(map[string]any{"binaryPath": bins.Stub, "proxyAdminPort": admin, "statusPort": status,
			"discoveryAddress": cp.Addr(), "drainDuration": "1s", "terminationDrainDuration": "1s"})
		env := append([]string{"PROXY_CONFIG=" + string(pc), "POD_NAME=" + spec.id, "POD_NAMESPACE=default",
			"SERVICE_ACCOUNT=perf", "INSTANCE_IP=127.0.0.1", "CLOUD_PLATFORM=none", "CA_ADDR=" + cp.Addr(),
			"ISTIO_META_CLUSTER_ID=Kubernetes", "ECC_SIGNATURE_ALGORITHM=" + keyAlgorithm(spec.rsaKeys), "SECRET_TTL=" + ttl.String(),
			"ISTIO_DELTA_XDS=" + strconv.FormatBool(spec.api == "DELTA_GRPC"), "PATH=" + os.Getenv("PATH")}, stubEnv...)
		p.DebugAddr = "127.0.0.1:" + strconv.Itoa(status)
		if p.Agent, err = startProc("pilot-agent "+spec.id, dir, env, bins.Agent, "proxy", "sidecar"); err != nil {
			return nil, err
		}
	} else {
		mode := "mux"
		if spec.kind == Reference {
			mode = "ref"
		}
		args := []string{"-mode", mode, "-discovery", cp.Addr(), "-secret-ttl", ttl.String()}
		if spec.pprof {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			p.DebugAddr = "127.0.0.1:" + strconv.Itoa(port)
			args = append(args, "-pprof", p.DebugAddr)
		}
		if spec.cpuProf != "" {
			args = append(args, "-cpuprofile", spec.cpuProf)
		}
		if err := writeBootstrap(filepath.Join(dir, bootstrapFile), spec.id, spec.api, admin); err != nil {
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		if p.Agent, err = startProc("agentchild("+mode+") "+spec.id, dir, nil, bins.Child, args...); err != nil {
			return nil, err
		}
		// Istio's agent starts Envoy once its sockets listen; do the same, so a stand-in never
		// waits out gRPC's reconnect backoff.
		if err := waitSockets(ctx, p.Agent, filepath.Join(dir, xdsSocketRel), filepath.Join(dir, sdsSocketRel)); err != nil {
			p.Stop()
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
		env := append(slices.Clip(stubEnv), "PERF_AGENT_PID="+strconv.Itoa(p.Agent.Pid())) // whose CPU its start reports
		stub, err := startProc("envoystub "+spec.id, dir, env, bins.Stub, "-c", bootstrapFile, "--drain-time-s", "1")
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.Stubs = append(p.Stubs, stub)
	}
	if spec.extra > 0 && p.Binary {
		// The extra downstreams read the bootstrap the agent writes and dial its socket.
		if err := waitSockets(ctx, p.Agent, filepath.Join(dir, bootstrapFile), filepath.Join(dir, xdsSocketRel)); err != nil {
			p.Stop()
			return nil, fmt.Errorf("pod %s: %w", spec.id, err)
		}
	}
	for k := range spec.extra {
		id := fmt.Sprintf("%s-d%d", spec.id, k+1)
		port, err := freePort()
		if err != nil {
			p.Stop()
			return nil, err
		}
		env := []string{"PERF_EVENTS=" + hub.Spec(), "PERF_STUB_ID=" + id, "PERF_ADMIN_PORT=" + strconv.Itoa(port)}
		stub, err := startProc("envoystub "+id, dir, env, bins.Stub, "-c", bootstrapFile)
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.Stubs = append(p.Stubs, stub)
		p.StubIDs = append(p.StubIDs, id)
	}
	return p, nil
}

// startFloor starts lab/floorfwd as the pod's agent (whose CPU and memory the scenarios read)
// and a stand-in with the xds-grpc pipe only: the floor carries xDS and serves no SDS.
func startFloor(ctx context.Context, p *Pod, dir string, bins Bins, cp *ControlPlane, spec podSpec, admin int, stubEnv []string) error {
	if bins.Floor == "" {
		return fmt.Errorf("pod %s: no floor forwarder built (Bins.Floor)", spec.id)
	}
	if err := writeBootstrapXDS(filepath.Join(dir, bootstrapFile), spec.id, spec.api, admin, false); err != nil {
		return fmt.Errorf("pod %s: %w", spec.id, err)
	}
	root := filepath.Join(dir, rootFile)
	sock := filepath.Join(dir, xdsSocketRel)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return err
	}
	var err error
	args := []string{"-listen", sock, "-upstream", cp.Addr(), "-root", root, "-server-name", IstiodName, "-token", Token,
		"-meta", "ClusterID=Kubernetes"}
	if spec.cpuProf != "" {
		args = append(args, "-cpuprofile", spec.cpuProf)
	}
	if p.Agent, err = startProc("floorfwd "+spec.id, dir, nil, bins.Floor, args...); err != nil {
		return err
	}
	if err := waitSockets(ctx, p.Agent, sock); err != nil {
		p.Stop()
		return fmt.Errorf("pod %s: %w", spec.id, err)
	}
	stub, err := startProc("envoystub(floor) "+spec.id, dir, stubEnv, bins.Stub, "-c", bootstrapFile, "--drain-time-s", "1")
	if err != nil {
		p.Stop()
		return err
	}
	p.Stubs = append(p.Stubs, stub)
	return nil
}

// waitSockets waits until every path exists, the agent exits, or ctx ends.
func waitSockets(ctx context.Context, agent *Proc, paths ...string) error {
	// A fine tick: the wait is part of the reference's start → Envoy exec'd (startup scenario).
	t := time.NewTicker(250 * time.Microsecond)
	defer t.Stop()
	for _, path := range paths {
		for {
			if _, err := os.Stat(path); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the agent's socket %s: %w", path, context.Cause(ctx))
			case <-agent.Done():
				return agent.ExitError()
			case <-t.C:
			}
		}
	}
	return nil
}

// writeBootstrap writes the part of Envoy's bootstrap the stand-in reads, for agents that do
// not render one (agentchild).
func writeBootstrap(path, id, api string, admin int) error {
	return writeBootstrapXDS(path, id, api, admin, true)
}

// writeBootstrapXDS is writeBootstrap, with the sds-grpc cluster only when sds is true.
func writeBootstrapXDS(path, id, api string, admin int, sds bool) error {
	pipe := func(name, sock string) map[string]any {
		return map[string]any{"name": name, "load_assignment": map[string]any{"cluster_name": name,
			"endpoints": []any{map[string]any{"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{
				"address": map[string]any{"pipe": map[string]any{"path": sock}}}}}}}}}
	}
	bs := map[string]any{
		"node":              map[string]any{"id": "sidecar~127.0.0.1~" + id + ".default~default.svc.cluster.local", "cluster": id + ".default"},
		"admin":             map[string]any{"address": map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": admin}}},
		"dynamic_resources": map[string]any{"ads_config": map[string]any{"api_type": api}},
		"static_resources":  map[string]any{"clusters": []any{pipe("xds-grpc", xdsSocketRel)}},
	}
	if sds {
		bs["static_resources"] = map[string]any{"clusters": []any{pipe("xds-grpc", xdsSocketRel), pipe("sds-grpc", sdsSocketRel)}}
	}
	b, err := json.Marshal(bs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Stop stops the stand-ins and the agent (with its group: Envoy under the real binary).
func (p *Pod) Stop() {
	for _, s := range p.Stubs {
		s.Stop(2 * time.Second)
	}
	if p.Agent != nil {
		p.Agent.Stop(5 * time.Second)
	}
}

// Failed returns the exit error of the first process of the pod that has exited, or nil.
func (p *Pod) Failed() error {
	if p.killed.Load() {
		return nil
	}
	if p.Agent != nil {
		if err := p.Agent.ExitError(); err != nil {
			return err
		}
	}
	for _, s := range p.Stubs {
		if err := s.ExitError(); err != nil {
			return err
		}
	}
	return nil
}

// Allocs reads the agent's runtime counters, heap objects and bytes allocated since start: from
// expvar (/debug/vars) of an agent child, from the MemStats the real binary's pprof index prints
// (/debug/pprof/heap?debug=1 on its status port). ok is false where the agent exposes neither.
func (p *Pod) Allocs(ctx context.Context) (mallocs, bytes uint64, ok bool) {
	if p.DebugAddr == "" {
		return 0, 0, false
	}
	path := "/debug/vars"
	if p.Binary {
		path = "/debug/pprof/heap?debug=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.DebugAddr+path, nil)
	if err != nil {
		return 0, 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	if p.Binary {
		return parseMemStats(resp.Body)
	}
	var v struct {
		Memstats struct{ Mallocs, TotalAlloc uint64 } `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, 0, false
	}
	return v.Memstats.Mallocs, v.Memstats.TotalAlloc, true
}

// keyAlgorithm is ECC_SIGNATURE_ALGORITHM: empty selects Istio's default, RSA.
func keyAlgorithm(rsa bool) string {
	if rsa {
		return ""
	}
	return "ECDSA"
}

// parseMemStats reads "# Mallocs = N" and "# TotalAlloc = N" from the runtime.MemStats that
// net/http/pprof appends to a text heap profile.
func parseMemStats(r io.Reader) (mallocs, bytes uint64, ok bool) {
	var seen int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, found := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err != nil:
		case k == "Mallocs":
			mallocs, seen = n, seen|1
		case k == "TotalAlloc":
			bytes, seen = n, seen|2
		}
	}
	return mallocs, bytes, seen == 3 && sc.Err() == nil
}

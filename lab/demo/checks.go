package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/lab/meshlab"
)

// poll calls f every interval until it reports done, f fails for good, ctx ends (returning
// the last transient error) or the agent exits.
func (d *demo) poll(ctx context.Context, every time.Duration, f func() (done bool, err error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	var last error
	for {
		done, err := f()
		if done {
			return err
		}
		last = err
		if d.agent != nil && d.agent.exited() {
			return fmt.Errorf("pilot-agent exited (%v); last check: %v", d.agent.err, last)
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("timed out: %w", last)
		case <-t.C:
		}
	}
}

// certInfo is what the account shows of a certificate.
type certInfo struct {
	serial   string
	id       string
	notAfter time.Time
	lifetime time.Duration
	keyAlg   string
}

func (c certInfo) String() string {
	return fmt.Sprintf("serial %s, %s, %s key, valid %v, expires %s", c.serial, c.id, c.keyAlg,
		c.lifetime.Round(time.Second), c.notAfter.Local().Format("15:04:05"))
}

// readCert reads the leaf of OUTPUT_CERTS/cert-chain.pem.
func (d *demo) readCert() (certInfo, error) {
	b, err := os.ReadFile(filepath.Join(d.certsDir, "cert-chain.pem"))
	if err != nil {
		return certInfo{}, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return certInfo{}, errors.New("cert-chain.pem holds no PEM block")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return certInfo{}, fmt.Errorf("cert-chain.pem: %w", err)
	}
	c := certInfo{serial: leaf.SerialNumber.String(), notAfter: leaf.NotAfter, lifetime: leaf.NotAfter.Sub(leaf.NotBefore), keyAlg: leaf.PublicKeyAlgorithm.String()}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); ok {
		c.keyAlg = "ECDSA " + k.Curve.Params().Name
	}
	if len(leaf.URIs) == 1 {
		c.id = leaf.URIs[0].String()
	}
	return c, nil
}

// certificate waits for the agent's first workload certificate in OUTPUT_CERTS.
func (d *demo) certificate(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := d.poll(ctx, 50*time.Millisecond, func() (bool, error) {
		c, err := d.readCert()
		if err != nil {
			return false, err
		}
		d.firstCrt = c
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("no certificate in %s: %w", d.certsDir, err)
	}
	c := d.firstCrt
	if c.id != d.spiffeID {
		return "", fmt.Errorf("certificate identity %q, want %q", c.id, d.spiffeID)
	}
	if !strings.HasPrefix(c.keyAlg, "ECDSA") {
		return "", fmt.Errorf("key is %s, want ECDSA (ECC_SIGNATURE_ALGORITHM=ECDSA)", c.keyAlg)
	}
	return fmt.Sprintf("issued by meshlab's CA for the agent's CSR (OUTPUT_CERTS=%s):\n%s", d.certsDir, c), nil
}

// standInEvent is a line of the stand-in's event file.
type standInEvent struct {
	Ev, Api, Type, Version, Name string
	N                            int
}

func (d *demo) standInEvents() ([]standInEvent, error) {
	f, err := os.Open(d.events)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []standInEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e standInEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

func shortType(u string) string { return u[strings.LastIndex(u, ".")+1:] }

// envoyConfig checks that Envoy got its clusters and listeners through the agent's xDS proxy
// and its certificate and roots over the agent's SDS.
func (d *demo) envoyConfig(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if !d.standIn {
		var st map[string]int
		err := d.poll(ctx, 100*time.Millisecond, func() (bool, error) {
			var err error
			st, err = d.envoyStats()
			return err == nil && st["cluster_manager.cds.update_success"] > 0 && st["listener_manager.lds.update_success"] > 0, err
		})
		if err != nil {
			return "", fmt.Errorf("envoy never accepted CDS and LDS: %w", err)
		}
		return fmt.Sprintf("envoy accepted CDS (%d updates) and LDS (%d updates) from the agent's xDS proxy",
			st["cluster_manager.cds.update_success"], st["listener_manager.lds.update_success"]), nil
	}
	var pushes map[string]standInEvent
	var sds map[string]bool
	err := d.poll(ctx, 50*time.Millisecond, func() (bool, error) {
		evs, err := d.standInEvents()
		if err != nil {
			return false, err
		}
		pushes, sds = map[string]standInEvent{}, map[string]bool{}
		for _, e := range evs {
			switch e.Ev {
			case "push":
				pushes[shortType(e.Type)] = e
			case "nack":
				return true, fmt.Errorf("the Envoy stand-in rejected %s version %s", shortType(e.Type), e.Version)
			case "sds":
				sds[e.Name] = true
			}
		}
		if pushes["Cluster"].Ev == "" || pushes["Listener"].Ev == "" || !sds["default"] || !sds["ROOTCA"] {
			return false, fmt.Errorf("so far: pushes %v, SDS %v", keys(pushes), keys(sds))
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	c, l := pushes["Cluster"], pushes["Listener"]
	return fmt.Sprintf("the Envoy stand-in (%s ADS over ./etc/istio/proxy/XDS) accepted %s and %s;\n"+
		"it got \"default\" and \"ROOTCA\" over SDS (./var/run/secrets/workload-spiffe-uds/socket)",
		c.Api, plural(c.N, "cluster"), plural(l.N, "listener")), nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// envoyStats reads a real Envoy's admin /stats.
func (d *demo) envoyStats() (map[string]int, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(d.ports.admin) + "/stats?usedonly")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	st := map[string]int{}
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if n, err := strconv.Atoi(v); ok && err == nil {
			st[k] = n
		}
	}
	return st, nil
}

// dns asks the agent's DNS proxy for the mesh's names.
func (d *demo) dns(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(d.ports.dns))
	var lines []string
	for _, q := range []struct{ name, want string }{
		{d.mesh.Services[0].Host + ".", d.mesh.Services[0].ClusterIP},
		{d.mesh.Services[1].Name + ".", d.mesh.Services[1].ClusterIP}, // the short name, same namespace
	} {
		var got string
		var took time.Duration
		err := d.poll(ctx, 100*time.Millisecond, func() (bool, error) {
			m := new(dns.Msg)
			m.SetQuestion(q.name, dns.TypeA)
			c := &dns.Client{Net: "udp", Timeout: time.Second}
			r, rtt, err := c.ExchangeContext(ctx, m, addr)
			if err != nil {
				return false, err
			}
			if r.Rcode != dns.RcodeSuccess {
				return false, fmt.Errorf("%s: %s", q.name, dns.RcodeToString[r.Rcode])
			}
			for _, rr := range r.Answer {
				if a, ok := rr.(*dns.A); ok {
					got, took = a.A.String(), rtt
					return true, nil
				}
			}
			return false, fmt.Errorf("%s: no A record in the answer", q.name)
		})
		if err != nil {
			return "", fmt.Errorf("DNS on %s: %w", addr, err)
		}
		if got != q.want {
			return "", fmt.Errorf("DNS on %s: %s answered %s, want %s (from the NameTable)", addr, q.name, got, q.want)
		}
		lines = append(lines, fmt.Sprintf("%s A → %s (%v)", q.name, got, took.Round(time.Microsecond)))
	}
	return fmt.Sprintf("the agent's DNS proxy on %s answered from meshlab's NameTable:\n%s", addr, strings.Join(lines, "\n")), nil
}

// readyWatch follows /healthz/ready from the agent's start, so that the account shows it
// turning ready. Its fields are written by its goroutine before done is closed.
type readyWatch struct {
	url     string
	done    chan struct{}
	seen    []string      // the distinct non-200 answers, in order
	readyAt time.Duration // since the agent started
	err     error
}

// watchReady starts polling url every 20ms until it answers 200 or ctx ends.
func (d *demo) watchReady(ctx context.Context) *readyWatch {
	w := &readyWatch{url: "http://127.0.0.1:" + strconv.Itoa(d.ports.status) + "/healthz/ready", done: make(chan struct{})}
	go func() {
		defer close(w.done)
		client := &http.Client{Timeout: time.Second}
		w.err = d.poll(ctx, 20*time.Millisecond, func() (bool, error) {
			resp, err := client.Get(w.url)
			if err != nil {
				w.note("no answer yet (" + shortErr(err) + ")")
				return false, err
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				w.readyAt = time.Since(d.agentStart)
				return true, nil
			}
			s := fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
			w.note(s)
			return false, errors.New(s)
		})
	}()
	return w
}

func (w *readyWatch) note(s string) {
	if len(w.seen) == 0 || w.seen[len(w.seen)-1] != s {
		w.seen = append(w.seen, s)
	}
}

func shortErr(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return err.Error()
}

// readiness waits for /healthz/ready on the status port to turn 200.
func (d *demo) readiness(ctx context.Context) (string, error) {
	w := d.ready
	select {
	case <-w.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if w.err != nil {
		return "", fmt.Errorf("%s never answered 200: %w", w.url, w.err)
	}
	return readinessAccount(w.url, w.readyAt, w.seen), nil
}

// readinessAccount tells the readiness step: when the agent turned ready and each distinct
// reason it was not ready before, whole (they name files and resources; one cut mid-path
// said nothing), one per line.
func readinessAccount(url string, readyAt time.Duration, seen []string) string {
	s := fmt.Sprintf("GET %s → 200, %v after the agent started\n(Envoy's CDS and LDS, the gRPC bootstrap's certificates and the DNS table all in)",
		url, readyAt.Round(time.Millisecond))
	for i, b := range seen {
		b = strings.Join(strings.Fields(b), " ") // a multi-line body stays on its line
		if i == 0 {
			s += "\nbefore that: " + b
		} else {
			s += "\n        then " + b
		}
	}
	return s
}

// badResource writes a broken resource file and checks that meshlab rejects it, naming the
// file and the field, and keeps serving the last good set; then removes it.
func (d *demo) badResource(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	version := d.lab.Version()
	path := filepath.Join(d.root, "meshlab", "resources", "zz-typo.yaml")
	if err := os.WriteFile(path, []byte("kind: Cluster\nname: typo\nconnect_timeout: 1s\nlb_polcy: ROUND_ROBIN\n"), 0o644); err != nil {
		return "", err
	}
	rejected, err := d.waitLoad(ctx, func(r meshlab.LoadResult) bool { return r.Err != nil })
	if err != nil {
		return "", fmt.Errorf("meshlab did not reject %s: %w", path, err)
	}
	if rejected.Version != version || !strings.Contains(rejected.Err.Error(), "zz-typo.yaml") || !strings.Contains(rejected.Err.Error(), "lb_polcy") {
		return "", fmt.Errorf("rejection should name zz-typo.yaml and lb_polcy and keep version %d: %+v", version, rejected)
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	if _, err := d.waitLoad(ctx, func(r meshlab.LoadResult) bool { return r.Err == nil }); err != nil {
		return "", fmt.Errorf("meshlab did not reload after the fix: %w", err)
	}
	msg := strings.Replace(rejected.Err.Error(), filepath.Join(d.root, "meshlab", "resources")+"/", "", 1)
	return fmt.Sprintf("meshlab rejected a file with a typo and kept serving version %d (%s):\n%s\n"+
		"the file was removed and the folder reloaded cleanly", version, rejected.Counts, msg), nil
}

// waitLoad waits for a load result that matches.
func (d *demo) waitLoad(ctx context.Context, match func(meshlab.LoadResult) bool) (meshlab.LoadResult, error) {
	for {
		select {
		case r := <-d.loads:
			if match(r) {
				return r, nil
			}
		case <-ctx.Done():
			return meshlab.LoadResult{}, ctx.Err()
		}
	}
}

// rotation waits for the agent to replace the certificate before it expires.
func (d *demo) rotation(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*d.o.CertTTL+10*time.Second)
	defer cancel()
	var next certInfo
	err := d.poll(ctx, 100*time.Millisecond, func() (bool, error) {
		c, err := d.readCert()
		if err != nil {
			return false, err
		}
		if c.serial == d.firstCrt.serial {
			return false, fmt.Errorf("still serial %s", c.serial)
		}
		next = c
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("no new certificate within %v of a %v certificate: %w", 2*d.o.CertTTL+10*time.Second, d.o.CertTTL, err)
	}
	if next.id != d.spiffeID {
		return "", fmt.Errorf("rotated certificate identity %q, want %q", next.id, d.spiffeID)
	}
	if !next.notAfter.After(d.firstCrt.notAfter) {
		return "", fmt.Errorf("rotated certificate expires %v, not after the first (%v)", next.notAfter, d.firstCrt.notAfter)
	}
	s := fmt.Sprintf("serial %s → %s before expiry (expires %s now)", d.firstCrt.serial, next.serial, next.notAfter.Local().Format("15:04:05"))
	if d.standIn {
		err := d.poll(ctx, 100*time.Millisecond, func() (bool, error) {
			evs, err := d.standInEvents()
			if err != nil {
				return false, err
			}
			n := 0
			for _, e := range evs {
				if e.Ev == "sds" && e.Name == "default" {
					n++
				}
			}
			if n < 2 {
				return false, fmt.Errorf("%d SDS pushes of \"default\"", n)
			}
			return true, nil
		})
		if err != nil {
			return "", fmt.Errorf("the Envoy stand-in never got the rotated certificate over SDS: %w", err)
		}
		s += "\nthe Envoy stand-in got the new certificate over SDS"
	}
	return s, nil
}

// shutdown stops the agent as Kubernetes does (SIGTERM) and checks that it exits 0, with
// Envoy, and leaves nothing behind.
func (d *demo) shutdown(context.Context) (string, error) {
	if d.agent == nil {
		return "nothing was started", nil
	}
	code, took, err := d.agent.stop(15 * time.Second)
	if err != nil {
		return "", err
	}
	if left := leftovers(d.built...); len(left) > 0 {
		return "", fmt.Errorf("processes left behind after the agent exited: %s", strings.Join(left, ", "))
	}
	if code != 0 {
		return "", fmt.Errorf("pilot-agent exited %d after SIGTERM", code)
	}
	return fmt.Sprintf("SIGTERM: pilot-agent drained and exited 0 in %v; no process left behind", took.Round(time.Millisecond)), nil
}

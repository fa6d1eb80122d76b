package bench

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wingman-mesh/wingman/lab/refagent"
	"github.com/wingman-mesh/wingman/mux"
)

// The floor: the least work any agent must do per forwarded byte on this machine is to read it
// from the TLS connection to Istiod and write it to Envoy's Unix socket. BenchmarkFloor measures
// a byte pump doing exactly that (and the reverse for the ACKs); BenchmarkForwardCPU measures
// Wingman's proxy in the same set-up. In both the middle runs in a child process (this test
// binary, re-executed), so its CPU is measured alone with getrusage; the upstream (gRPC over TLS)
// and the raw-frame client are the same code in the parent for both.

const (
	middleEnv    = "WINGMAN_BENCH_MIDDLE" // floor | wingman | reference
	childUpEnv   = "WINGMAN_BENCH_UPSTREAM"
	childSockEnv = "WINGMAN_BENCH_SOCKET"
	childCAEnv   = "WINGMAN_BENCH_CA"
	serverName   = "istiod.bench.test"
)

// BenchmarkFloor pushes one response per iteration through a TLS→Unix byte pump.
func BenchmarkFloor(b *testing.B) { benchCPU(b, "floor") }

// BenchmarkForwardCPU pushes one response per iteration through Wingman's proxy, set up exactly
// as BenchmarkFloor, so the two cpu-ns/MB figures of one run give Wingman's multiple of the floor.
func BenchmarkForwardCPU(b *testing.B) { benchCPU(b, "wingman") }

// BenchmarkReferenceCPU is the reference proxy (lab/refagent: decode and re-encode, as Istio's
// agent) in the same set-up: with BenchmarkFloor it gives the floor's own share of the
// reference's CPU, below which no agent's ratio to the reference can go.
func BenchmarkReferenceCPU(b *testing.B) { benchCPU(b, "reference") }

func benchCPU(b *testing.B, middle string) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			resp := response(b, s.size, s.res)
			up, ca := tlsPingPong(b, resp)
			m := startMiddle(b, middle, up, ca)
			c := newClient(b, m.sock)
			c.push(b) // warm: buffers sized, pools filled
			b.SetBytes(int64(len(resp)))
			cpu0 := m.cpu(b)
			b.ResetTimer()
			for b.Loop() {
				if c.push(b) != len(resp) {
					b.Fatal("short response")
				}
			}
			b.StopTimer()
			ns := float64(m.cpu(b) - cpu0)
			b.ReportMetric(ns/float64(b.N), "cpu-ns/op")
			b.ReportMetric(ns/float64(b.N)/(float64(len(resp))/(1<<20)), "cpu-ns/MB")
		})
	}
}

// tlsPingPong is pingPong behind TLS, with a fresh self-signed certificate for serverName; it
// returns the address and the PEM file of that certificate (the roots to trust).
func tlsPingPong(tb testing.TB, resp []byte) (addr, caFile string) {
	cert, pemBytes := selfSigned(tb)
	caFile = filepath.Join(tb.TempDir(), "root.pem")
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		tb.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return servePingPong(tb, resp, grpc.Creds(creds)), caFile
}

func selfSigned(tb testing.TB) (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: serverName}, DNSNames: []string{serverName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// middle is a child process serving the Unix socket in front of the upstream.
type middle struct {
	sock string
	in   io.Writer
	out  *bufio.Reader
}

func startMiddle(tb testing.TB, kind, upstream, caFile string) *middle {
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(tb.TempDir(), "XDS")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), middleEnv+"="+kind, childUpEnv+"="+upstream, childSockEnv+"="+sock, childCAEnv+"="+caFile)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(); _ = cmd.Wait() }) // the child exits when its stdin closes
	m := &middle{sock: sock, in: in, out: bufio.NewReader(out)}
	if line, err := m.out.ReadString('\n'); err != nil || line != "ready\n" {
		tb.Fatalf("middle %s did not start: %q %v", kind, line, err)
	}
	return m
}

// cpu asks the child for the CPU time (user + system) it has used so far.
func (m *middle) cpu(tb testing.TB) int64 {
	if _, err := io.WriteString(m.in, "cpu\n"); err != nil {
		tb.Fatal(err)
	}
	line, err := m.out.ReadString('\n')
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return ns
}

func init() {
	if kind := os.Getenv(middleEnv); kind != "" {
		os.Exit(runMiddle(kind)) // this test binary re-executed as the middle
	}
}

// runMiddle is the child's main: it serves until its stdin closes, answering each line with its
// CPU time in nanoseconds.
func runMiddle(kind string) int {
	sock, upstream, caFile := os.Getenv(childSockEnv), os.Getenv(childUpEnv), os.Getenv(childCAEnv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serve func() error
	switch kind {
	case "floor":
		l, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: roots, ServerName: serverName, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
		serve = func() error { return pump(ctx, l, upstream, cfg) }
	case "wingman", "reference":
		var proxy interface {
			Serve(context.Context, net.Listener) error
		}
		var err error
		if kind == "wingman" {
			proxy, err = mux.New(mux.Config{SocketPath: sock, Upstream: mux.UpstreamConfig{Address: upstream, RootCAFile: caFile, ServerName: serverName}})
		} else {
			proxy, err = refagent.New(refagent.Config{Upstream: upstream, RootCAFile: caFile, ServerName: serverName, MaxMessageBytes: maxMsg})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		l, err := mux.Listen(sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		serve = func() error { return proxy.Serve(ctx, l) }
	default:
		fmt.Fprintf(os.Stderr, "unknown middle %q\n", kind)
		return 1
	}
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Nanoseconds())
	}
	cancel()
	<-errc
	return 0
}

// pump accepts Unix connections and copies bytes between each and its own TLS connection to
// upstream, both ways, with one 256 KiB buffer per direction (larger than the 64 KiB
// transport/h2grpc's connections borrow while data flows: the floor is not handicapped).
func pump(ctx context.Context, l net.Listener, upstream string, cfg *tls.Config) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() { <-ctx.Done(); l.Close() }()
	for {
		down, err := l.Accept()
		if err != nil {
			return nil
		}
		up, err := tls.Dial("tcp", upstream, cfg)
		if err != nil {
			down.Close()
			return err
		}
		stop := context.AfterFunc(ctx, func() { down.Close(); up.Close() })
		wg.Add(2)
		copyHalf := func(dst, src net.Conn) {
			defer wg.Done()
			_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 256<<10))
			down.Close()
			up.Close()
			stop()
		}
		go copyHalf(down, up)
		go copyHalf(up, down)
	}
}

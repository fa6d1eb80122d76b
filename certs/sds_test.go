package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestNACKGetsNoResponse: a NACK is counted and answered with nothing; the next response the
// client sees is the one for the name it adds afterwards.
func TestNACKGetsNoResponse(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	c.mustRecv()
	if err := c.stream.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.SecretType, ResourceNames: []string{ResourceDefault},
		ResponseNonce: c.nonce, ErrorDetail: &status.Status{Code: 3, Message: "bad secret"}}); err != nil {
		t.Fatal(err)
	}
	c.send(c.nonce, ResourceDefault, ResourceRootCA)
	got := c.mustRecv()
	if _, ok := got[ResourceRootCA]; !ok || len(got) != 1 {
		t.Fatalf("after a NACK and an ACK adding ROOTCA, got %d secrets (ROOTCA: %v)", len(got), ok)
	}
	if e.counter("istio_agent_pilot_total_xds_rejects") != 1 {
		t.Errorf("rejects = %v", e.counter("istio_agent_pilot_total_xds_rejects"))
	}
}

// TestConcurrentStreams: 100 streams all receive every rotation, while one more stream that
// never reads sits stalled: it delays nobody.
func TestConcurrentStreams(t *testing.T) {
	e := newEnv(t, nil)
	// The stalled stream asks for 300 names (each an alias served the workload certificate,
	// ~450 KB a push): its sends block on flow control at once, since it never reads.
	stalled := e.dial()
	var aliases []string
	for i := range 300 {
		aliases = append(aliases, "alias-"+strconv.Itoa(i))
	}
	stalled.send("", aliases...)
	const n = 100
	clients := make([]*sdsClient, n)
	for i := range clients {
		clients[i] = e.dial()
		clients[i].send("", ResourceDefault)
	}
	const rotations = 3
	var prev *x509.Certificate
	for r := 0; r <= rotations; r++ {
		if r > 0 {
			e.rotate()
		}
		leaves := make([]*x509.Certificate, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := c.recv(ResourceDefault)
				if err == nil {
					leaves[i], err = checkPair(got[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i := range clients {
			if errs[i] != nil {
				t.Fatalf("rotation %d, stream %d: %v", r, i, errs[i])
			}
			if !leaves[i].Equal(leaves[0]) || (prev != nil && leaves[i].Equal(prev)) {
				t.Fatalf("rotation %d, stream %d: not the new certificate", r, i)
			}
		}
		prev = leaves[0]
	}
}

// TestMalformedRequests: each bad request ends its stream with a status naming the problem.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, nil)
	node := &corev3.Node{Id: "sidecar~1.1.1.1~a.b~b.svc.cluster.local"}
	for _, tc := range []struct {
		name string
		req  *discovery.DiscoveryRequest
		code codes.Code
	}{
		{"no node", &discovery.DiscoveryRequest{TypeUrl: fastpath.SecretType, ResourceNames: []string{"default"}}, codes.InvalidArgument},
		{"wrong type", &discovery.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}, codes.InvalidArgument},
		{"empty name", &discovery.DiscoveryRequest{Node: node, TypeUrl: fastpath.SecretType, ResourceNames: []string{""}}, codes.InvalidArgument},
		{"file-cert without key", &discovery.DiscoveryRequest{Node: node, TypeUrl: fastpath.SecretType, ResourceNames: []string{"file-cert:/a.pem"}}, codes.InvalidArgument},
		{"missing file", &discovery.DiscoveryRequest{Node: node, TypeUrl: fastpath.SecretType, ResourceNames: []string{"file-root:/nonexistent/ca.pem"}}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial()
			if err := c.stream.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			_, err := c.stream.Recv()
			if got := grpcstatus.Code(err); got != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
		})
	}
	// The server is still fine for a well-formed stream.
	c := e.dial()
	c.send("", ResourceDefault)
	c.mustRecv()
}

// selfSigned makes a matching certificate and key in PEM.
func selfSigned(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// kubeletWrite publishes files the way kubelet does: a new timestamped directory, a ..data_tmp
// symlink to it renamed over ..data, and top-level symlinks through ..data.
func kubeletWrite(t testing.TB, dir string, gen int, files map[string][]byte) {
	t.Helper()
	ts := filepath.Join(dir, "..gen_"+string(rune('a'+gen)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		write(t, filepath.Join(ts, name), string(b))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFileCertKubeletRotation: file-cert: and file-root: resources follow two kubelet-style
// ..data swaps, pushing each new matching pair.
func TestFileCertKubeletRotation(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FileDebounce = 10 * time.Millisecond; c.Clock = nil })
	dir := filepath.Join(tempDir(t), "tls")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	certName := "file-cert:" + filepath.Join(dir, "tls.crt") + "~" + filepath.Join(dir, "tls.key")
	rootName := "file-root:" + filepath.Join(dir, "ca.crt")
	cert, key := selfSigned(t, "gen0")
	kubeletWrite(t, dir, 0, map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert})
	c := e.dial()
	c.send("", certName, rootName)
	got := map[string][]byte{}
	for len(got) < 2 {
		for name, sec := range c.mustRecv(certName, rootName) {
			got[name] = sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
		}
	}
	if string(got[certName]) != string(cert) {
		t.Fatal("file-cert does not carry the file's certificate")
	}
	for gen := 1; gen <= 2; gen++ {
		cert, key := selfSigned(t, "gen"+string(rune('0'+gen)))
		kubeletWrite(t, dir, gen, map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert})
		seen := map[string]bool{}
		for !seen[certName] || !seen[rootName] {
			for name, sec := range c.mustRecv(certName, rootName) {
				switch name {
				case certName:
					seen[name] = string(sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) == string(cert)
				case rootName:
					seen[name] = string(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()) == string(cert)
				}
			}
		}
	}
}

// TestFileMountedWorkloadCerts: with ./etc/certs-style files present, default and ROOTCA come
// from them, no CSR is sent, and GetClientCertificate returns the file pair.
func TestFileMountedWorkloadCerts(t *testing.T) {
	dir := tempDir(t)
	cert, key := selfSigned(t, "mounted")
	write(t, filepath.Join(dir, "cert-chain.pem"), string(cert))
	write(t, filepath.Join(dir, "key.pem"), string(key))
	write(t, filepath.Join(dir, "root-cert.pem"), string(cert))
	e := newEnv(t, func(c *Config) { c.FileCertDirs = []string{"/nonexistent", dir}; c.Clock = nil })
	c := e.dial()
	c.send("", ResourceDefault, ResourceRootCA)
	got := map[string]bool{}
	for len(got) < 2 {
		for name := range c.mustRecv() {
			got[name] = true
		}
	}
	<-e.m.Ready()
	kp, _ := e.m.GetClientCertificate(nil)
	if kp.Leaf == nil || kp.Leaf.Subject.CommonName != "mounted" {
		t.Fatal("GetClientCertificate does not return the file-mounted pair")
	}
	if e.ca.Requests() != 0 {
		t.Fatalf("%d CSRs sent with file-mounted certificates", e.ca.Requests())
	}
}

// TestProbeSDSSocket: a live socket is healthy; a stale file is removed.
func TestProbeSDSSocket(t *testing.T) {
	dir := tempDir(t)
	path := filepath.Join(dir, "s")
	if ok, err := ProbeSDSSocket(path, time.Second); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ProbeSDSSocket(path, time.Second); !ok || err != nil {
		t.Fatalf("live: %v %v", ok, err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	if ok, err := ProbeSDSSocket(path, time.Second); ok || err != nil {
		t.Fatalf("stale: %v %v", ok, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("stale socket not removed")
	}
}

// TestSocketRemovedOnStop: the SDS socket exists while the server runs and is gone once it
// has stopped.
func TestSocketRemovedOnStop(t *testing.T) {
	path := filepath.Join(tempDir(t), "sds.sock")
	t.Run("serve", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.SDSSocketPath = path })
		if fi, err := os.Stat(e.srv.Path()); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("socket while serving: %v", err)
		}
	})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after the server stopped: %v", err)
	}
}

package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// TestStartup: the socket serves before any certificate; a client that asks at once gets a valid
// pair and the root; the CA saw the token, ClusterID and CA_HEADER metadata.
func TestStartup(t *testing.T) {
	e := newEnv(t, nil)
	if c, _ := e.m.GetClientCertificate(nil); c == nil {
		t.Fatal("GetClientCertificate returned nil before the first certificate")
	}
	c := e.dial()
	c.send("", ResourceDefault, ResourceRootCA)
	got := map[string]bool{}
	var rootPEM []byte
	for len(got) < 2 {
		for name, sec := range c.mustRecv() {
			got[name] = true
			if name == ResourceRootCA {
				rootPEM = sec.GetValidationContext().GetTrustedCa().GetInlineBytes()
			} else if _, err := checkPair(sec, e.clock.Now(), e.ca.RootPEM()); err != nil {
				t.Fatalf("default: %v", err)
			}
		}
	}
	if !bytes.Equal(rootPEM, e.ca.RootPEM()) {
		t.Error("ROOTCA is not the CA's root")
	}
	md := e.ca.LastMetadata()
	if md.Get("authorization")[0] != "Bearer secret-token" || md.Get("clusterid")[0] != "Kubernetes" || md.Get("x-wingman")[0] != "yes" {
		t.Errorf("CA metadata %v", md)
	}
	cert, _ := e.m.GetClientCertificate(nil)
	if cert.Leaf == nil || cert.Leaf.URIs[0].String() != e.m.spiffeID {
		t.Errorf("GetClientCertificate: %+v", cert.Leaf)
	}
	if e.counter("istio_agent_num_outgoing_requests") != 1 {
		t.Errorf("num_outgoing_requests = %v", e.counter("istio_agent_num_outgoing_requests"))
	}
}

// TestRotationByFakeClock: at the rotation time a new certificate is pushed; until then the old
// one is served, and it is still valid when replaced.
func TestRotationByFakeClock(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.GracePeriodRatioJitter = 0 })
	c := e.dial()
	c.send("", ResourceDefault)
	first, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
	if err != nil {
		t.Fatal(err)
	}
	w := e.m.cur.Load()
	if want := first.NotAfter.Add(-12 * time.Hour); !w.rotateAt.Equal(want) {
		t.Fatalf("rotateAt %v, want expiry − 0.5 × 24h = %v", w.rotateAt, want)
	}
	e.rotate()
	second, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
	if err != nil {
		t.Fatal(err)
	}
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("rotation pushed the same certificate")
	}
	if !e.clock.Now().Before(first.NotAfter) {
		t.Fatal("the old certificate had expired before it was replaced")
	}
}

// TestBackToBackRotations: 1,000 rotations while a client checks, at every clock step, that it
// holds a valid matching key and chain: the longest time without a valid secret must be zero.
func TestBackToBackRotations(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 50
	}
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	held, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e.rotate() // moves the clock to the rotation time
		if _, err := checkPairAt(held, e.clock.Now()); err != nil {
			t.Fatalf("rotation %d: the held certificate is not valid when rotation starts: %v", i, err)
		}
		sec := c.mustRecv(ResourceDefault)[ResourceDefault]
		next, err := checkPair(sec, e.clock.Now(), e.ca.RootPEM())
		if err != nil {
			t.Fatalf("rotation %d: pushed secret: %v", i, err)
		}
		if next.SerialNumber.Cmp(held.SerialNumber) == 0 {
			t.Fatalf("rotation %d: same certificate pushed again", i)
		}
		held = next
	}
	// The counter moves just after the push the client has already seen, and before rotate
	// waits on the clock for the next rotation: wait for that.
	if err := waitForWaiter(e.ctx, e.clock); err != nil {
		t.Fatal(err)
	}
	if got := e.m.renewals.Load(); got != uint64(n+1) {
		t.Errorf("%d renewals, want %d", got, n+1)
	}
}

func checkPairAt(leaf *x509.Certificate, now time.Time) (*x509.Certificate, error) {
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return nil, os.ErrDeadlineExceeded
	}
	return leaf, nil
}

// waitLog waits for a log record whose message contains msg and returns its attributes joined.
func (e *env) waitLog(msg string) string {
	e.t.Helper()
	for {
		select {
		case r := <-e.logs:
			if !strings.Contains(r.Message, msg) {
				continue
			}
			var b strings.Builder
			r.Attrs(func(a slog.Attr) bool { b.WriteString(a.String() + " "); return true })
			return b.String()
		case <-e.ctx.Done():
			e.t.Fatalf("no log %q", msg)
		}
	}
}

// TestCADownAtStart: the first fetch fails while the CA is down, requests wait, and the
// certificate arrives after the CA recovers and the backoff elapses.
func TestCADownAtStart(t *testing.T) {
	e := newEnvWith(t, testca.ModeUnavailable, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	if attrs := e.waitLog("certificate fetch failed"); !strings.Contains(attrs, "Unavailable") {
		t.Errorf("failure log: %s", attrs)
	}
	if err := waitForWaiter(e.ctx, e.clock); err != nil {
		t.Fatal(err)
	}
	if e.counter("istio_agent_num_failed_outgoing_requests") < 1 {
		t.Error("no failure counted")
	}
	e.ca.SetMode(testca.ModeOK)
	e.clock.Advance(time.Minute)
	if _, err := checkPair(c.mustRecv()[ResourceDefault], e.clock.Now(), e.ca.RootPEM()); err != nil {
		t.Fatal(err)
	}
}

// TestBadCAResponses: each kind of bad response is refused with a clear error and a metric, and
// the old certificate stays in service; the next good response is installed.
func TestBadCAResponses(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	good := c.mustRecv(ResourceDefault)[ResourceDefault]
	for _, tc := range []struct {
		mode testca.Mode
		want string
	}{
		{testca.ModeGarbage, "no PEM certificate"},
		{testca.ModeOneElement, "fewer than two certificates"},
		{testca.ModeWrongSAN, "do not name spiffe://cluster.local/ns/default/sa/sleep"},
		{testca.ModeWrongKey, "public key does not match"},
		{testca.ModeExpired, "expired"},
		{testca.ModeUntrusted, "does not chain to the returned root"},
		{testca.ModeUnavailable, "Unavailable"},
	} {
		before := e.counter("istio_agent_num_failed_outgoing_requests")
		e.ca.SetMode(tc.mode)
		e.rotate()
		if attrs := e.waitLog("certificate fetch failed"); !strings.Contains(attrs, tc.want) {
			t.Errorf("mode %d: error %q does not say %q", tc.mode, attrs, tc.want)
		}
		if got := e.counter("istio_agent_num_failed_outgoing_requests"); got != before+1 {
			t.Errorf("mode %d: failures %v → %v", tc.mode, before, got)
		}
		cur, _ := e.m.GetClientCertificate(nil)
		if !bytes.Equal(cur.Certificate[0], pemDER(good.GetTlsCertificate().GetCertificateChain().GetInlineBytes())) {
			t.Fatalf("mode %d: the old certificate was replaced", tc.mode)
		}
	}
	if e.counter("istio_agent_wingman_csr_bad_responses_total") != 6 {
		t.Errorf("bad responses = %v, want 6", e.counter("istio_agent_wingman_csr_bad_responses_total"))
	}
	// The CA heals: the retry (after backoff) installs and pushes a new certificate, and the
	// stream saw nothing in between.
	e.ca.SetMode(testca.ModeOK)
	e.rotate()
	next := c.mustRecv()[ResourceDefault]
	if _, err := checkPair(next, e.clock.Now(), e.ca.RootPEM()); err != nil {
		t.Fatal(err)
	}
	if proto.Equal(next, good) {
		t.Fatal("no new certificate after recovery")
	}
}

func pemDER(b []byte) []byte {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil
	}
	return block.Bytes
}

// TestRootChangePushesROOTCA: a new CA root reaches every stream that asked for ROOTCA.
func TestRootChangePushesROOTCA(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceDefault, ResourceRootCA)
	for n := 0; n < 2; {
		n += len(c.mustRecv())
	}
	c.send(c.nonce, ResourceDefault, ResourceRootCA)
	old := e.ca.RootPEM()
	if err := e.ca.RotateRoot(); err != nil {
		t.Fatal(err)
	}
	e.rotate()
	var root []byte
	for root == nil {
		for name, sec := range c.mustRecv(ResourceDefault, ResourceRootCA) {
			if name == ResourceRootCA {
				root = sec.GetValidationContext().GetTrustedCa().GetInlineBytes()
			}
		}
	}
	if bytes.Equal(root, old) || !bytes.Equal(root, e.ca.RootPEM()) {
		t.Fatal("ROOTCA push does not carry the new root")
	}
}

// TestOutputCerts: OUTPUT_CERTS gets the three files, mode 0600, rewritten on rotation.
func TestOutputCerts(t *testing.T) {
	out := filepath.Join(tempDir(t), "out")
	e := newEnv(t, func(c *Config) { c.OutputCertsDir = out })
	<-e.m.Ready()
	check := func() []byte {
		t.Helper()
		var chain []byte
		for _, f := range []string{"key.pem", "cert-chain.pem", "root-cert.pem"} {
			st, err := os.Stat(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v", f, st.Mode())
			}
		}
		chain, _ = os.ReadFile(filepath.Join(out, "cert-chain.pem"))
		key, _ := os.ReadFile(filepath.Join(out, "key.pem"))
		if _, err := tls.X509KeyPair(chain, key); err != nil {
			t.Fatal(err)
		}
		return chain
	}
	// The files are written right after the push; wait for the first rotation's files.
	c := e.dial()
	c.send("", ResourceDefault)
	c.mustRecv(ResourceDefault)
	e.rotate() // the first write happened before the manager went back to waiting
	c.mustRecv(ResourceDefault)
	first := check()
	e.rotate()
	c.mustRecv(ResourceDefault)
	if err := waitForWaiter(e.ctx, e.clock); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, check()) {
		t.Fatal("OUTPUT_CERTS not rewritten on rotation")
	}
}

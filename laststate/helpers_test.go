package laststate

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/lab/testca"
	"github.com/wingman-mesh/wingman/mux"
)

var testID = Identity{NodeID: "sidecar~10.0.0.1~app-1.ns~ns.svc.cluster.local", Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"}

// workloadCerts has lab/testca (a real Istio-compatible CA) sign a workload certificate for id:
// chain (leaf and intermediates), key and roots in PEM, as certs.Manager keeps them.
func workloadCerts(t testing.TB, ca *testca.CA, id Identity) Certs {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ca.CreateCertificate(context.Background(), &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	if err != nil {
		t.Fatal(err)
	}
	chain := resp.GetCertChain()
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var c Certs
	c.Chain = []byte(strings.Join(chain[:len(chain)-1], ""))
	c.Roots = []byte(chain[len(chain)-1])
	c.Key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
	return c
}

func newCA(t testing.TB) *testca.CA {
	ca, err := testca.New(testca.Config{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// encode writes a snapshot of s to bytes with the file's encoder.
func encode(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	e := newEncoder(&b)
	e.meta(s.Identity, s.Written)
	e.certs(s.Certs)
	if nt := s.NameTable; nt != nil {
		e.nameTable(int64(len(nt.Data)), bytes.NewReader(nt.Data))
	}
	for _, st := range s.Streams {
		e.stream(st.Delta, st.NodeID)
		for _, r := range st.Responses {
			e.response(r.TypeURL, r.Version, int64(len(r.Data)), bytes.NewReader(r.Data))
		}
	}
	if err := e.close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// shmDir is a directory on a tmpfs (/dev/shm), or the test is skipped.
func shmDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "laststate-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := CheckTmpfs(dir); err != nil {
		t.Skipf("/dev/shm is not a tmpfs here: %v", err)
	}
	return dir
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// readAll reads and releases restored responses.
func readAll(t testing.TB, rs []mux.RestoredResponse) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range rs {
		b, err := io.ReadAll(r.Open())
		r.Release()
		if err != nil || len(b) != r.Size() {
			t.Fatalf("restored response: %d of %d bytes: %v", len(b), r.Size(), err)
		}
		out = append(out, b)
	}
	return out
}

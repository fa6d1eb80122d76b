package laststate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/mux"
)

// ErrNotExist is Load's error when there is no snapshot.
var ErrNotExist = os.ErrNotExist

// DialBudget is how long the agent gives its first dial to Istiod before it restores: a refused
// connection fails at once; a black-holed one costs this much of the start.
const DialBudget = 500 * time.Millisecond

// Load reads and decodes the snapshot in dir. The directory must be a tmpfs; the file at most
// max bytes (DefaultMaxBytes when max ≤ 0). An error says why nothing was read (os.ErrNotExist
// when there is no snapshot).
func Load(dir string, max int64) (*Snapshot, error) {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	s, err := load(f, dir, path, max)
	if err != nil {
		f.Close()
		return nil, err
	}
	// The file stays open (Snapshot.Close): the responses are read from it when served, and a
	// snapshot written meanwhile replaces the name, not this file.
	s.file, s.cls = f, f
	return s, nil
}

func load(f *os.File, dir, path string, max int64) (*Snapshot, error) {
	if err := CheckTmpfs(dir); err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	s, err := decode(f, st.Size(), max, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Check refuses a snapshot that is not this pod's (node id, namespace, service account, trust
// domain), whose certificate is not valid now, does not match its key, does not name this
// workload's SPIFFE identity or is not verified by its roots, or whose responses do not parse as
// what their records say, or whose name table does not decode as a NameTable (as the DNS proxy
// decodes it: dns.Server.UpdateNameTable).
func (s *Snapshot) Check(id Identity, now time.Time) error {
	if s.Identity != id {
		return fmt.Errorf("snapshot belongs to another workload (node %q, namespace %q, service account %q, trust domain %q)",
			s.Identity.NodeID, s.Identity.Namespace, s.Identity.ServiceAccount, s.Identity.TrustDomain)
	}
	kp, err := tls.X509KeyPair(s.Certs.Chain, s.Certs.Key)
	if err != nil {
		return fmt.Errorf("snapshot certificate: %w", err)
	}
	leaf := kp.Leaf
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return fmt.Errorf("snapshot certificate not valid now (valid %s to %s)", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	want := "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
	named := false
	for _, u := range leaf.URIs {
		named = named || u.String() == want
	}
	if !named {
		return fmt.Errorf("snapshot certificate does not name %s", want)
	}
	roots := x509.NewCertPool()
	if !appendPEM(roots, s.Certs.Roots) {
		return errors.New("snapshot roots hold no certificate")
	}
	inter := x509.NewCertPool()
	for _, der := range kp.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("snapshot chain: %w", err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("snapshot roots do not verify its certificate: %w", err)
	}
	if s.NameTable != nil {
		b, err := s.ReadNameTable()
		if err == nil {
			err = (&ndspb.NameTable{}).UnmarshalVT(b)
		}
		if err != nil {
			return fmt.Errorf("snapshot name table: %w", err)
		}
	}
	var scan fastpath.ResponseScanner
	buf := make([]byte, 32<<10)
	for _, st := range s.Streams {
		for _, r := range st.Responses {
			// Read as it passes, as mux reads a cut-through response: never whole in memory.
			scan.Reset(st.Delta, int(r.Size()), nil)
			_, err := io.CopyBuffer(scanWriter{&scan}, s.Open(r), buf)
			var typeURL string
			if err == nil && st.Delta {
				var d fastpath.DeltaResponse
				err = scan.FinishDelta(&d)
				typeURL = d.TypeURL
			} else if err == nil {
				var d fastpath.Response
				err = scan.FinishSotW(&d)
				typeURL = d.TypeURL
			}
			if err == nil && typeURL != r.TypeURL {
				err = fmt.Errorf("response of type %q recorded as %q", typeURL, r.TypeURL)
			}
			if err != nil {
				return fmt.Errorf("snapshot response: %w", err)
			}
		}
	}
	return nil
}

// ReadNameTable returns the bytes of the snapshot's name table (nil when it holds none), whole:
// the DNS proxy takes it whole. Its size is bounded by the snapshot's.
func (s *Snapshot) ReadNameTable() ([]byte, error) {
	if s.NameTable == nil {
		return nil, nil
	}
	b := make([]byte, s.NameTable.Size())
	if _, err := io.ReadFull(s.Open(*s.NameTable), b); err != nil {
		return nil, fmt.Errorf("read the name table: %w", err)
	}
	return b, nil
}

type scanWriter struct{ s *fastpath.ResponseScanner }

func (w scanWriter) Write(b []byte) (int, error) {
	if err := w.s.Feed(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func appendPEM(pool *x509.CertPool, b []byte) bool {
	ok := false
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return ok
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil && blk.Type == "CERTIFICATE" {
			pool.AddCert(c)
			ok = true
		}
	}
}

// Versions lists the snapshot's types and versions, for the one log line of a restore.
func (s *Snapshot) Versions() []string {
	var out []string
	for _, st := range s.Streams {
		for _, r := range st.Responses {
			out = append(out, fmt.Sprintf("%s=%s", shortType(r.TypeURL), r.Version))
		}
	}
	return out
}

func shortType(t string) string {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] == '.' || t[i] == '/' {
			return t[i+1:]
		}
	}
	return t
}

// Unreachable reports whether Istiod at addr cannot be reached within budget (a TCP connection
// refused, timed out or failing), and why.
func Unreachable(ctx context.Context, addr string, budget time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return true, err
	}
	c.Close()
	return false, nil
}

// Source serves a checked snapshot's responses to mux (mux.Restorer) until Istiod is reached.
// The metric wingman_last_state_serving_restored is 1 meanwhile.
type Source struct {
	log   *slog.Logger
	gauge *metric.Gauge

	mu   sync.Mutex
	snap *Snapshot                           // nil once live and no response is out
	resp map[streamKey]map[string][]Response // nil once live
	out  int                                 // responses handed out and not released
}

// NewSource serves s (already Checked).
func NewSource(s *Snapshot, reg *metric.Registry, log *slog.Logger) *Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	src := &Source{log: log, snap: s, resp: map[streamKey]map[string][]Response{},
		gauge: reg.Gauge("wingman_last_state_serving_restored", "1 while the xDS proxy serves configuration and the certificate restored from the last-state snapshot, until Istiod is reached.")}
	for _, st := range s.Streams {
		k := streamKey{st.Delta, st.NodeID}
		m := src.resp[k]
		if m == nil {
			m = map[string][]Response{}
			src.resp[k] = m
		}
		for _, r := range st.Responses {
			m[r.TypeURL] = append(m[r.TypeURL], r)
		}
	}
	src.gauge.Set(1)
	return src
}

// Responses implements mux.Restorer: the responses of the type, in the order the client applied
// them, each read from the snapshot file in pieces as mux sends it. The recorder stores one per
// type (a Delta log is merged when the snapshot is written); several, in a snapshot written
// otherwise, are served in their order. The file stays open until every one is released.
func (s *Source) Responses(delta bool, nodeID, typeURL string) []mux.RestoredResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mux.RestoredResponse
	for _, r := range s.resp[streamKey{delta, nodeID}][typeURL] {
		s.out++
		out = append(out, &restored{src: s, r: r})
	}
	return out
}

// restored is one response of the snapshot handed to mux.
type restored struct {
	src *Source
	r   Response
}

func (r *restored) Size() int { return int(r.r.Size()) }

func (r *restored) Open() io.Reader {
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	return r.src.snap.Open(r.r) // the file is open: this response is not released
}

func (r *restored) Release() {
	s := r.src
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out--
	s.closeLocked()
}

// closeLocked closes the snapshot once live and no response is out.
func (s *Source) closeLocked() {
	if s.resp == nil && s.out == 0 && s.snap != nil {
		s.snap.Close()
		s.snap = nil
	}
}

// Live implements mux.Restorer: the restored state is handed over to Istiod's. Responses already
// handed out are still read until released.
func (s *Source) Live() {
	s.mu.Lock()
	s.resp = nil
	s.closeLocked()
	s.mu.Unlock()
	s.gauge.Set(0)
	s.log.Info("Istiod reached: its responses replace the restored state")
}

var _ mux.Restorer = (*Source)(nil)

package laststate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
)

// sample is a small snapshot with a DNS name table and both kinds of stream; the responses are
// built with fastpath's builders, the bytes a client is sent; the name table with the NameTable
// message the DNS proxy decodes.
func sample(t testing.TB, c Certs) *Snapshot {
	res := [][]byte{fastpath.AppendResource(nil, fastpath.ClusterType, []byte("\x0a\x03one")),
		fastpath.AppendResource(nil, fastpath.ClusterType, []byte("\x0a\x03two"))}
	sotw := fastpath.AppendResponse(nil, []byte("cds-3"), fastpath.ClusterType, "n1", res)
	return &Snapshot{Identity: testID, Written: time.Unix(1700000000, 5), Certs: c,
		NameTable: &Response{TypeURL: fastpath.NameTableType, Data: sampleNameTable(t)}, Streams: []Stream{
			{NodeID: testID.NodeID, Responses: []Response{{TypeURL: fastpath.ClusterType, Version: "cds-3", Data: sotw}}},
			{Delta: true, NodeID: "proxyless~10.0.0.1~app-1.ns~ns.svc.cluster.local"},
		}}
}

// sampleNameTable is a NameTable's bytes, as Istiod sends them in an NDS response's resource.
func sampleNameTable(t testing.TB) []byte {
	b, err := (&ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		"productpage.ns.svc.cluster.local": {Ips: []string{"10.0.0.1"}, Registry: "Kubernetes", Shortname: "productpage", Namespace: "ns"},
	}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	s := sample(t, Certs{Chain: []byte("chain"), Key: []byte("key"), Roots: []byte("roots")})
	b := encode(t, s)
	got, err := Decode(bytes.NewReader(b), int64(len(b)), DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Written.Equal(s.Written) || got.Identity != s.Identity || string(got.Certs.Key) != "key" || len(got.Streams) != 2 ||
		!bytes.Equal(got.Streams[0].Responses[0].Data, s.Streams[0].Responses[0].Data) || !got.Streams[1].Delta {
		t.Fatalf("round trip: %+v", got)
	}
	if got.NameTable == nil || !bytes.Equal(got.NameTable.Data, s.NameTable.Data) || got.NameTable.TypeURL != fastpath.NameTableType {
		t.Fatalf("name table: %+v", got.NameTable)
	}
	if again := encode(t, got); !bytes.Equal(again, b) {
		t.Fatal("re-encoding a decoded snapshot changed it")
	}
	// Load's decode keeps where the name table is and reads it from the file.
	idx, err := decode(bytes.NewReader(b), int64(len(b)), DefaultMaxBytes, false)
	if err != nil {
		t.Fatal(err)
	}
	idx.file = bytes.NewReader(b)
	if nt, err := idx.ReadNameTable(); err != nil || !bytes.Equal(nt, s.NameTable.Data) {
		t.Fatalf("name table read from the file: %v", err)
	}
	// An empty table (Istiod names no host) is a table, not none.
	s.NameTable.Data = []byte{}
	b = encode(t, s)
	for _, keep := range []bool{true, false} {
		got, err := decode(bytes.NewReader(b), int64(len(b)), DefaultMaxBytes, keep)
		if err != nil || got.NameTable == nil || got.NameTable.Size() != 0 {
			t.Fatalf("empty name table (keep %v): %+v %v", keep, got, err)
		}
	}
	// Without one, none.
	s.NameTable = nil
	b = encode(t, s)
	if got, err := Decode(bytes.NewReader(b), int64(len(b)), DefaultMaxBytes); err != nil || got.NameTable != nil {
		t.Fatalf("no name table: %+v %v", got, err)
	}
}

// TestRefusals: every damaged snapshot is refused whole, with the reason's class.
func TestRefusals(t *testing.T) {
	b := encode(t, sample(t, Certs{Chain: []byte("chain"), Key: []byte("key"), Roots: []byte("roots")}))
	decode := func(b []byte, max int64) error {
		s, err := Decode(bytes.NewReader(b), int64(len(b)), max)
		if err == nil || s != nil {
			return errors.New("accepted")
		}
		if s, ierr := decode(bytes.NewReader(b), int64(len(b)), max, false); ierr == nil || s != nil {
			return errors.New("accepted by Load's decode")
		}
		return err
	}
	// Every proper prefix is truncated or corrupt (cut inside the end record: checksum).
	for n := range len(b) {
		if err := decode(b[:n], DefaultMaxBytes); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	// Every single flipped byte is refused.
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x20
		if err := decode(c, DefaultMaxBytes); err == nil || err.Error() == "accepted" {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if err := decode(b, int64(len(b)-1)); !errors.Is(err, ErrOversized) {
		t.Fatalf("over the bound: %v", err)
	}
	// Format 1 (before the name table record) and any later one are refused whole, naming both.
	for _, v := range []byte{1, 3} {
		c := bytes.Clone(b)
		c[len(magic)] = v
		err := decode(c, DefaultMaxBytes)
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), fmt.Sprintf("format %d, this agent reads only format 2", v)) {
			t.Fatalf("format %d: %v", v, err)
		}
	}
	if err := decode(append(bytes.Clone(b), 0), DefaultMaxBytes); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// misplacedNameTables are snapshots, checksummed, whose name table record is where the format
// has none: twice, before the certificate, after a stream.
func misplacedNameTables(t testing.TB) map[string][]byte {
	c := Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")}
	nt := sampleNameTable(t)
	out := map[string][]byte{}
	for name, write := range map[string]func(e *encoder){
		"twice": func(e *encoder) {
			e.meta(testID, time.Unix(1700000000, 0))
			e.certs(c)
			e.nameTable(int64(len(nt)), bytes.NewReader(nt))
			e.nameTable(int64(len(nt)), bytes.NewReader(nt))
		},
		"before certs": func(e *encoder) {
			e.meta(testID, time.Unix(1700000000, 0))
			e.nameTable(int64(len(nt)), bytes.NewReader(nt))
			e.certs(c)
		},
		"after a stream": func(e *encoder) {
			e.meta(testID, time.Unix(1700000000, 0))
			e.certs(c)
			e.stream(false, testID.NodeID)
			e.nameTable(int64(len(nt)), bytes.NewReader(nt))
		},
	} {
		var b bytes.Buffer
		e := newEncoder(&b)
		write(e)
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Bytes()
	}
	return out
}

// TestNameTablePlace: a name table record out of its place is refused, by both decoders.
func TestNameTablePlace(t *testing.T) {
	for name, b := range misplacedNameTables(t) {
		for _, keep := range []bool{true, false} {
			s, err := decode(bytes.NewReader(b), int64(len(b)), DefaultMaxBytes, keep)
			if s != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "name table record out of place") {
				t.Fatalf("%s (keep %v): %v", name, keep, err)
			}
		}
	}
}

// TestCheck: a snapshot is restored only by its own pod, with a certificate valid now, naming the
// workload and verified by its roots.
func TestCheck(t *testing.T) {
	ca := newCA(t)
	good := workloadCerts(t, ca, testID)
	now := time.Now()
	if err := sample(t, good).Check(testID, now); err != nil {
		t.Fatalf("good snapshot refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(s *Snapshot, id *Identity, at *time.Time)
		want string
	}{
		{"foreign node", func(s *Snapshot, id *Identity, _ *time.Time) {
			id.NodeID = "sidecar~10.0.0.2~app-2.ns~ns.svc.cluster.local"
		}, "another workload"},
		{"foreign namespace", func(s *Snapshot, id *Identity, _ *time.Time) { id.Namespace = "other" }, "another workload"},
		{"foreign service account", func(s *Snapshot, id *Identity, _ *time.Time) { id.ServiceAccount = "other" }, "another workload"},
		{"foreign trust domain", func(s *Snapshot, id *Identity, _ *time.Time) { id.TrustDomain = "other.local" }, "another workload"},
		{"expired", func(_ *Snapshot, _ *Identity, at *time.Time) { *at = at.Add(2 * time.Hour) }, "not valid now"},
		{"not yet valid", func(_ *Snapshot, _ *Identity, at *time.Time) { *at = at.Add(-time.Hour) }, "not valid now"},
		{"roots of another CA", func(s *Snapshot, _ *Identity, _ *time.Time) { s.Certs.Roots = newCA(t).RootPEM() }, "do not verify"},
		{"no roots", func(s *Snapshot, _ *Identity, _ *time.Time) { s.Certs.Roots = nil }, "no certificate"},
		{"key of another certificate", func(s *Snapshot, _ *Identity, _ *time.Time) { s.Certs.Key = workloadCerts(t, ca, testID).Key }, "private key does not match"},
		{"certificate of another workload", func(s *Snapshot, _ *Identity, at *time.Time) {
			other := testID
			other.ServiceAccount = "other"
			s.Certs = workloadCerts(t, ca, other)
			// The test CA's certificates start the second they are issued: checked at the
			// start of the test, one issued a second later would be refused as not yet valid.
			*at = time.Now()
		}, "does not name spiffe://cluster.local/ns/ns/sa/app"},
		{"response of another type", func(s *Snapshot, _ *Identity, _ *time.Time) {
			s.Streams[0].Responses[0].TypeURL = fastpath.ListenerType
		}, "recorded as"},
		{"malformed response", func(s *Snapshot, _ *Identity, _ *time.Time) { s.Streams[0].Responses[0].Data = []byte{0xff, 0xff} }, "snapshot response"},
		{"malformed name table", func(s *Snapshot, _ *Identity, _ *time.Time) { s.NameTable.Data = []byte{0xff, 0xff} }, "snapshot name table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, id, at := sample(t, good), testID, now
			tc.edit(s, &id, &at)
			err := s.Check(id, at)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestNotTmpfs: a directory that is not a tmpfs is refused by name, for writing and restoring.
func TestNotTmpfs(t *testing.T) {
	dir := t.TempDir()
	if CheckTmpfs(dir) == nil {
		t.Skip("the test's temporary directory is itself a tmpfs")
	}
	_, err := NewRecorder(RecorderConfig{Dir: dir, Identity: testID, Certs: func() (Certs, bool) { return Certs{}, false }})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not on a tmpfs") {
		t.Fatalf("recorder on a disk directory: %v", err)
	}
	b := encode(t, sample(t, Certs{}))
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, 0); err == nil || !strings.Contains(err.Error(), "not on a tmpfs") {
		t.Fatalf("load from a disk directory: %v", err)
	}
}

// FuzzDecode: outside bytes never crash the decoder; whatever it accepts encodes back to the
// same bytes (nothing is half-read).
func FuzzDecode(f *testing.F) {
	f.Add(encode(f, sample(f, Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")})))
	f.Add([]byte(magic + "\x01"))
	f.Add([]byte(magic + "\x01\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte(magic + "\x02"))
	f.Add([]byte(magic + "\x02\x05\x03abc"))
	f.Add([]byte(magic + "\x02\x05\xff\xff\xff\xff\x0f"))
	noTable := sample(f, Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")})
	noTable.NameTable = nil
	f.Add(encode(f, noTable))
	for _, b := range misplacedNameTables(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(bytes.NewReader(b), int64(len(b)), 1<<20)
		idx, ierr := decode(bytes.NewReader(b), int64(len(b)), 1<<20, false)
		if (err == nil) != (ierr == nil) {
			t.Fatalf("Decode: %v; Load's decode: %v", err, ierr)
		}
		if ierr == nil && len(idx.Streams) != len(s.Streams) {
			t.Fatal("Load's decode found other streams")
		}
		if ierr == nil && (idx.NameTable == nil) != (s.NameTable == nil) {
			t.Fatal("Load's decode found another name table")
		}
		if ierr == nil && idx.NameTable != nil {
			idx.file = bytes.NewReader(b)
			if nt, err := idx.ReadNameTable(); err != nil || !bytes.Equal(nt, s.NameTable.Data) {
				t.Fatalf("Load's decode reads another name table: %v", err)
			}
		}
		if err != nil {
			if s != nil {
				t.Fatal("a snapshot returned with an error")
			}
			return
		}
		if again := encode(t, s); !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes do not re-encode to themselves")
		}
		_ = s.Check(testID, time.Unix(1700000000, 0)) // certificates and responses: refused or not, never a crash
	})
}

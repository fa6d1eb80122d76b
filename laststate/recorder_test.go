package laststate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/syncbuf"
)

// runRecorder runs a recorder on a tmpfs directory until the test ends.
func runRecorder(t *testing.T, dir string, c Certs, max int64) (*Recorder, *metric.Registry, *syncbuf.Buffer) {
	t.Helper()
	reg := metric.NewRegistry()
	var log syncbuf.Buffer
	rec, err := NewRecorder(RecorderConfig{Dir: dir, Identity: testID, MaxBytes: max, Registry: reg,
		Logger: newTextLogger(&log), Certs: func() (Certs, bool) { return c, true }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return rec, reg, &log
}

// send hands sr a response in pieces of 7 bytes, as mux does for a cut-through one.
func send(sr interface {
	Message(int)
	Piece(mem.Buffer)
}, b []byte) {
	sr.Message(len(b))
	for len(b) > 0 {
		n := min(7, len(b))
		sr.Piece(mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
}

func cds(version, nonce string, size int) []byte {
	return fastpath.AppendResponse(nil, []byte(version), fastpath.ClusterType, nonce,
		[][]byte{fastpath.AppendResource(nil, fastpath.ClusterType, append([]byte{0x0a, 0x01, 'c', 0x12, byte(size)}, bytes.Repeat([]byte("x"), size)...))})
}

// flush waits for a snapshot write (or skip) that has taken in the events so far.
func flush(t *testing.T, rec *Recorder) {
	t.Helper()
	<-rec.flush()
}

func snapVersion(t *testing.T, dir string) string {
	t.Helper()
	s, err := Load(dir, 0)
	if err != nil {
		return "none: " + err.Error()
	}
	defer s.Close()
	return versions(s, false)[fastpath.ClusterType]
}

// TestRecorderClearsLeftovers: spools and a temporary snapshot a killed agent left are removed
// at start; the snapshot itself is kept.
func TestRecorderClearsLeftovers(t *testing.T) {
	dir := shmDir(t)
	for _, f := range []string{"." + FileName + ".tmp-123", FileName, SpoolDir + "/7"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewRecorder(RecorderConfig{Dir: dir, Certs: func() (Certs, bool) { return Certs{}, false }}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	spools, _ := os.ReadDir(filepath.Join(dir, SpoolDir))
	if strings.Join(names, ",") != SpoolDir+","+FileName || len(spools) != 0 {
		t.Fatalf("left: %v, spools %d", names, len(spools))
	}
}

// TestRecorderKeepsOnlyAccepted: a response enters the snapshot when the client ACKs it; a NACKed
// one never does, nor one left unanswered; unanswered ones are bounded per type.
func TestRecorderKeepsOnlyAccepted(t *testing.T) {
	dir := shmDir(t)
	rec, _, _ := runRecorder(t, dir, Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")}, 0)
	sr := rec.Stream(false, testID.NodeID)
	send(sr, cds("cds-1", "n1", 50))
	sr.Answered(fastpath.ClusterType, "n1", true)
	flush(t, rec)
	if v := snapVersion(t, dir); v != "cds-1" {
		t.Fatalf("after the ACK of cds-1: %s", v)
	}
	send(sr, cds("cds-2", "n2", 50))
	sr.Answered(fastpath.ClusterType, "n2", false)
	send(sr, cds("cds-3", "n3", 50)) // never answered
	flush(t, rec)
	if v := snapVersion(t, dir); v != "cds-1" {
		t.Fatalf("after a NACK and an unanswered response: %s, want cds-1", v)
	}
	for i := range 40 {
		send(sr, cds("cds-x", "x"+string(rune('a'+i)), 50))
	}
	flush(t, rec)
	spools, _ := os.ReadDir(filepath.Join(dir, SpoolDir))
	if len(spools) > maxPending+1 {
		t.Fatalf("%d spool files for 40 unanswered responses, want at most %d + the accepted one", len(spools), maxPending)
	}
	sr.Close()
	flush(t, rec)
	if spools, _ = os.ReadDir(filepath.Join(dir, SpoolDir)); len(spools) != 1 {
		t.Fatalf("%d spool files after the stream closed, want the accepted one", len(spools))
	}
}

// TestRecorderBound: a snapshot over its bound is not written, the previous one is removed (a
// restore would otherwise serve something older than what the client holds), one warning.
func TestRecorderBound(t *testing.T) {
	dir := shmDir(t)
	rec, reg, log := runRecorder(t, dir, Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")}, 4<<10)
	sr := rec.Stream(false, testID.NodeID)
	send(sr, cds("cds-1", "n1", 100))
	sr.Answered(fastpath.ClusterType, "n1", true)
	flush(t, rec)
	if v := snapVersion(t, dir); v != "cds-1" {
		t.Fatalf("small snapshot: %s", v)
	}
	big := fastpath.AppendResponse(nil, []byte("cds-2"), fastpath.ClusterType, "n2",
		[][]byte{fastpath.AppendResource(nil, fastpath.ClusterType, bytes.Repeat([]byte{0x0a, 0x01, 'c'}, 3000))})
	send(sr, big)
	sr.Answered(fastpath.ClusterType, "n2", true)
	flush(t, rec)
	flush(t, rec)
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Fatalf("snapshot over the bound left in place: %v", err)
	}
	if n := strings.Count(log.String(), "over its bound"); n != 1 {
		t.Fatalf("%d warnings about the bound, want 1:\n%s", n, log.String())
	}
	if v, _ := reg.Value("wingman_last_state_skipped_total"); v < 2 {
		t.Fatalf("skipped = %v", v)
	}
}

// TestRecorderKeepsEachStream: Envoy's ADS stream and a proxyless gRPC client's (another node id,
// here SotW too) are kept apart in the snapshot and each restored only to its own node.
func TestRecorderKeepsEachStream(t *testing.T) {
	dir := shmDir(t)
	c := workloadCerts(t, newCA(t), testID)
	rec, _, _ := runRecorder(t, dir, c, 0)
	const grpcNode = "sidecar~10.0.0.1~app-1.ns~ns.svc.cluster.local-grpc"
	envoy, grpc := rec.Stream(false, testID.NodeID), rec.Stream(false, grpcNode)
	send(envoy, cds("cds-1", "e1", 40))
	send(grpc, cds("cds-9", "g1", 60))
	envoy.Answered(fastpath.ClusterType, "e1", true)
	grpc.Answered(fastpath.ClusterType, "g1", true)
	flush(t, rec)
	s, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	src := NewSource(s, metric.NewRegistry(), nil)
	defer src.Live()
	for node, want := range map[string]string{testID.NodeID: "cds-1", grpcNode: "cds-9"} {
		out := readAll(t, src.Responses(false, node, fastpath.ClusterType))
		var r fastpath.Response
		var p fastpath.Peeker
		if len(out) != 1 || p.PeekResponse(mem.BufferSlice{mem.SliceBuffer(out[0])}, &r) != nil || r.Version != want {
			t.Fatalf("%s: %d responses, version %q; want %s", node, len(out), r.Version, want)
		}
	}
	if src.Responses(false, "sidecar~10.0.0.9~x.ns~ns.svc.cluster.local", fastpath.ClusterType) != nil {
		t.Fatal("served to an unknown node")
	}
}

// TestRecorderDeltaGap: a Delta response that cannot be recorded (here malformed) leaves a gap in
// what the client applied, so the stream's key is left out of the snapshot, with a warning; a
// new stream of the key (Envoy reconnected) makes it whole again with its first ACK.
func TestRecorderDeltaGap(t *testing.T) {
	dir := shmDir(t)
	rec, _, log := runRecorder(t, dir, Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")}, 0)
	delta := func(version, nonce string) []byte {
		a, _ := anypb.New(&cluster.Cluster{Name: "c1"})
		b, err := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, SystemVersionInfo: version, Nonce: nonce,
			Resources: []*discovery.Resource{{Name: "c1", Version: version, Resource: a}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	streams := func() int {
		s, err := Load(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return len(s.Streams)
	}
	sr := rec.Stream(true, testID.NodeID)
	send(sr, delta("cds-1", "n1"))
	sr.Answered(fastpath.ClusterType, "n1", true)
	flush(t, rec)
	if n := streams(); n != 1 {
		t.Fatalf("%d streams after the first ACK", n)
	}
	send(sr, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	send(sr, delta("cds-3", "n3"))
	sr.Answered(fastpath.ClusterType, "n3", true)
	flush(t, rec)
	if n := streams(); n != 0 || !strings.Contains(log.String(), "left out of the snapshot") {
		t.Fatalf("%d streams after a gap, want the key left out (log: %s)", n, log.String())
	}
	sr.Close()
	again := rec.Stream(true, testID.NodeID)
	send(again, delta("cds-4", "n4"))
	again.Answered(fastpath.ClusterType, "n4", true)
	flush(t, rec)
	s, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v := versions(s, true)[fastpath.ClusterType]; v != "cds-4" {
		t.Fatalf("after a new stream's ACK: %q, want cds-4", v)
	}
}

// nameTableOf is the name table of the snapshot in dir, "none" without one.
func nameTableOf(t *testing.T, dir string) string {
	t.Helper()
	s, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.NameTable == nil {
		return "none"
	}
	b, err := s.ReadNameTable()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecorderNameTable: the DNS name table the agent accepted is in the snapshot as it was
// handed over; a newer one replaces it (one superseded before it was spooled is never written);
// an empty table is a table; it counts towards the bound; a recorder seeded from an earlier
// snapshot keeps its table until the agent accepts another.
func TestRecorderNameTable(t *testing.T) {
	dir := shmDir(t)
	c := Certs{Chain: []byte("c"), Key: []byte("k"), Roots: []byte("r")}
	rec, _, _ := runRecorder(t, dir, c, 8<<10)
	sr := rec.Stream(false, testID.NodeID)
	send(sr, cds("cds-1", "n1", 50))
	sr.Answered(fastpath.ClusterType, "n1", true)
	flush(t, rec)
	if nt := nameTableOf(t, dir); nt != "none" {
		t.Fatalf("before any name table: %q", nt)
	}
	rec.NameTable([]byte("table-1"))
	flush(t, rec)
	if nt := nameTableOf(t, dir); nt != "table-1" || snapVersion(t, dir) != "cds-1" {
		t.Fatalf("name table %q, CDS %s", nt, snapVersion(t, dir))
	}
	rec.NameTable([]byte("table-2"))
	rec.NameTable([]byte("table-3"))
	flush(t, rec)
	if nt := nameTableOf(t, dir); nt != "table-3" {
		t.Fatalf("after two tables: %q, want the newer", nt)
	}
	if spools, _ := os.ReadDir(filepath.Join(dir, SpoolDir)); len(spools) != 2 {
		t.Fatalf("%d spool files, want the CDS response and one table", len(spools))
	}
	rec.NameTable([]byte{})
	flush(t, rec)
	if s, err := Load(dir, 0); err != nil || s.NameTable == nil || s.NameTable.Size() != 0 {
		t.Fatalf("empty table: %+v %v", s, err)
	} else {
		s.Close()
	}
	rec.NameTable(bytes.Repeat([]byte("n"), 8<<10))
	flush(t, rec)
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Fatalf("a name table over the bound written: %v", err)
	}
	rec.NameTable([]byte("table-4"))
	flush(t, rec)

	// The next agent, seeded from this snapshot, writes the table on until it accepts another.
	prev, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer prev.Close()
	dir2 := shmDir(t)
	rec2, err := NewRecorder(RecorderConfig{Dir: dir2, Identity: testID, Certs: func() (Certs, bool) { return c, true }})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec2.Seed(prev); err != nil { // before Run, as the agent does
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec2.Run(ctx) }()
	defer func() { cancel(); <-done }()
	rec2.CertsChanged()
	flush(t, rec2)
	if nt := nameTableOf(t, dir2); nt != "table-4" || snapVersion(t, dir2) != "cds-1" {
		t.Fatalf("seeded: name table %q, CDS %s", nt, snapVersion(t, dir2))
	}
	rec2.NameTable([]byte("table-5"))
	flush(t, rec2)
	if nt := nameTableOf(t, dir2); nt != "table-5" {
		t.Fatalf("seeded, then a new table: %q", nt)
	}
}

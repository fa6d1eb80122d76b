package fastpath

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The expected values of these tests are what Peeker.PeekResponse and Peeker.PeekDeltaResponse
// give on the whole message, which is the scanner fed it in one piece: a split must not change
// the result (their agreement with proto.Unmarshal is what FuzzPeekResponse and FuzzPeekDelta
// check), and, for EarlyTypeURL, the offset of the first Any's type_url in bytes written by
// proto.Marshal.

// peekResult is what a peek or a scan of one message gives.
type peekResult struct {
	sotw  Response
	delta DeltaResponse
	names []string // the visit calls, in order
	err   string
}

func (r peekResult) String() string {
	return fmt.Sprintf("sotw %+v delta %+v names %q err %q", r.sotw, r.delta, r.names, r.err)
}

func (r peekResult) equal(o peekResult) bool {
	return r.sotw == o.sotw && r.delta == o.delta && slices.Equal(r.names, o.names) && r.err == o.err
}

func recordNames(names *[]string) func(NameKind, []byte, []byte) {
	return func(k NameKind, name, version []byte) {
		*names = append(*names, fmt.Sprintf("%d:%q:%t@%q:%t", k, name, name == nil, version, version == nil))
	}
}

// peekWhole peeks msg whole with Peeker.
func peekWhole(msg []byte, delta bool) peekResult {
	var p Peeker
	var r peekResult
	var err error
	if delta {
		err = p.PeekDeltaResponse(mem.BufferSlice{mem.SliceBuffer(msg)}, &r.delta, recordNames(&r.names))
	} else {
		err = p.PeekResponse(mem.BufferSlice{mem.SliceBuffer(msg)}, &r.sotw)
	}
	if err != nil {
		r = peekResult{err: err.Error()}
	}
	return r
}

// scanPieces feeds msg to s in pieces of the given lengths (the last piece takes the rest). It
// also returns the number of bytes fed when EarlyTypeURL first said yes, -1 if never, and the
// URL it said.
func scanPieces(s *ResponseScanner, msg []byte, delta bool, pieces []int) (peekResult, int, string) {
	var r peekResult
	s.Reset(delta, len(msg), recordNames(&r.names))
	earlyAt, early := -1, ""
	var err error
	for i := 0; len(msg) > 0 && err == nil; i++ {
		k := len(msg)
		if i < len(pieces) {
			k = min(pieces[i], k)
		}
		err = s.Feed(msg[:k])
		msg = msg[k:]
		if t, ok := s.EarlyTypeURL(); ok && earlyAt < 0 {
			earlyAt, early = s.Fed(), t
		}
	}
	if err == nil {
		if delta {
			err = s.FinishDelta(&r.delta)
		} else {
			err = s.FinishSotW(&r.sotw)
		}
	}
	if err != nil {
		r = peekResult{err: err.Error()}
	}
	return r, earlyAt, early
}

func ones(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1
	}
	return p
}

func randomPieces(n int, rng *rand.Rand) []int {
	var p []int
	for n > 0 {
		k := 1 + rng.IntN(min(n, 1+rng.IntN(300)))
		p = append(p, k)
		n -= k
	}
	return p
}

// checkSplits scans msg in 1-byte pieces, in every two-piece split, in random pieces and whole,
// and checks each result against Peeker's on the whole message.
func checkSplits(t *testing.T, msg []byte, delta bool) peekResult {
	t.Helper()
	want := peekWhole(msg, delta)
	var s ResponseScanner
	splits := [][]int{ones(len(msg)), nil}
	for cut := 1; cut < len(msg) && len(msg) < 2000; cut++ {
		splits = append(splits, []int{cut})
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(msg))))
	for range 20 {
		splits = append(splits, randomPieces(len(msg), rng))
	}
	for _, pieces := range splits {
		got, _, _ := scanPieces(&s, msg, delta, pieces)
		if !got.equal(want) {
			t.Fatalf("pieces %v of %x:\n got %v\nwant %v", pieces, msg, got, want)
		}
	}
	return want
}

func raw(build func(b []byte) []byte) []byte { return build(nil) }

// unknownFields appends one field of every wire type, a nested group included, under numbers
// no DiscoveryResponse or Resource uses.
func unknownFields(b []byte) []byte {
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, 1<<63)
	b = protowire.AppendTag(b, 10, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	b = protowire.AppendTag(b, 11, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 12, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("unknown"))
	b = protowire.AppendTag(b, 13, protowire.StartGroupType)
	b = protowire.AppendTag(b, 14, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("in a group"))
	b = protowire.AppendTag(b, 14, protowire.EndGroupType)
	b = protowire.AppendTag(b, 15, protowire.VarintType)
	b = protowire.AppendVarint(b, 300)
	b = protowire.AppendTag(b, 13, protowire.EndGroupType)
	return b
}

func TestScanResponseMatchesPeek(t *testing.T) {
	big := sampleResponse(30)
	built := AppendResponse(nil, []byte("2026-12-03T04:00:00Z/17"), ClusterType, "nonce-3",
		[][]byte{AppendResource(nil, ClusterType, []byte("c1")), AppendResource(nil, ClusterType, bytes.Repeat([]byte{0xff}, 300))})
	for name, msg := range map[string][]byte{
		"marshalled":     marshal(t, big),
		"AppendResponse": built,
		"empty":          nil,
		"no type_url":    marshal(t, &discovery.DiscoveryResponse{VersionInfo: "1", Resources: []*anypb.Any{{TypeUrl: "t/x"}}}),
		"unknown fields": append(unknownFields(nil), append(marshal(t, big), unknownFields(nil)...)...),
		"repeated strings": raw(func(b []byte) []byte {
			b = protowire.AppendTag(b, respTypeURL, protowire.BytesType)
			b = protowire.AppendString(b, "first")
			b = protowire.AppendTag(b, respNonce, protowire.BytesType)
			b = protowire.AppendString(b, "")
			b = protowire.AppendTag(b, respTypeURL, protowire.BytesType)
			return protowire.AppendString(b, ListenerType)
		}),
		"malformed Any": raw(func(b []byte) []byte { // Peeker does not look inside resources
			b = protowire.AppendTag(b, respResource, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{0x0a, 0x7f, 0xff, 0x07})
			b = protowire.AppendTag(b, respResource, protowire.BytesType)
			return protowire.AppendBytes(b, []byte{0x0b, 0x0a, 0x01, 'x'})
		}),
	} {
		t.Run(name, func(t *testing.T) {
			if got := checkSplits(t, msg, false); got.err != "" {
				t.Fatalf("valid message refused: %s", got.err)
			}
		})
	}
}

func TestScanDeltaResponseMatchesPeek(t *testing.T) {
	resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: "s1", TypeUrl: ClusterType, Nonce: "n10",
		Resources: []*discovery.Resource{
			{Name: "x", Version: "v1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: bytes.Repeat([]byte("x"), 500)}},
			{Name: "y", Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte("body-y")}},
			{Version: "v3", Aliases: []string{"a"}},
			{Name: "a-longer-name-that-spans-pieces", Version: "2026-12-03T04:00:00Z/17"},
		},
		RemovedResources: []string{"z", "", "w"}}
	// A Resource with its fields out of order, repeated, with unknown fields, and an empty name.
	odd := raw(func(b []byte) []byte {
		b = protowire.AppendTag(b, resName, protowire.BytesType)
		b = protowire.AppendString(b, "dropped")
		b = unknownFields(b)
		b = protowire.AppendTag(b, resResource, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte{0x12, 0x01, 'v', 0x0a, 0x01, 't'})
		b = protowire.AppendTag(b, resName, protowire.BytesType)
		b = protowire.AppendString(b, "")
		b = protowire.AppendTag(b, resVersion, protowire.VarintType) // not a string: skipped
		return protowire.AppendVarint(b, 5)
	})
	for name, msg := range map[string][]byte{
		"marshalled": marshal(t, resp),
		"empty":      nil,
		"odd resource": raw(func(b []byte) []byte {
			b = protowire.AppendTag(b, drespResources, protowire.BytesType)
			b = protowire.AppendBytes(b, odd)
			b = protowire.AppendTag(b, drespResources, protowire.BytesType)
			b = protowire.AppendBytes(b, nil)
			return unknownFields(b)
		}),
		"removed only": marshal(t, &discovery.DeltaDiscoveryResponse{Nonce: "n", RemovedResources: []string{"a", "b"}}),
	} {
		t.Run(name, func(t *testing.T) {
			if got := checkSplits(t, msg, true); got.err != "" {
				t.Fatalf("valid message refused: %s", got.err)
			}
		})
	}
}

// TestScanMalformed checks that malformed messages fail, with the same error whatever the split.
func TestScanMalformed(t *testing.T) {
	good := marshal(t, sampleResponse(3))
	goodDelta := marshal(t, &discovery.DeltaDiscoveryResponse{Nonce: "n", Resources: []*discovery.Resource{
		{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte("xyz")}}}})
	cases := map[string][]byte{
		"field 0":             {0x00},
		"length past end":     {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"string cut":          {0x22, 0x05, 'a'},
		"varint overflow":     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"key cut":             {0x80},
		"value varint cut":    {0x08, 0x80},
		"fixed64 cut":         {0x09, 1, 2, 3},
		"end group alone":     {0x0c},
		"wire type 6":         {0x0e},
		"group not closed":    {0x0b, 0x08, 0x01},
		"group wire type 7":   {0x0b, 0x0f, 0x0c},
		"field too large":     {0x80, 0x80, 0x80, 0x80, 0x10},
		"resource past end":   {0x12, 0x05, 0x0a},
		"string too long":     append([]byte{0x22, 0x81, 0x80, 0x04}, make([]byte, maxPeekString+1)...),
		"groups too deep":     append(bytes.Repeat([]byte{0x0b}, 65), bytes.Repeat([]byte{0x0c}, 65)...),
		"groups deep but ok":  append(bytes.Repeat([]byte{0x0b}, 64), bytes.Repeat([]byte{0x0c}, 64)...),
		"good cut in two":     good[:len(good)/2],
		"good with junk tail": append(slices.Clip(good), 0x22, 0x7f),
	}
	deltaCases := map[string][]byte{
		"resource field 0":        {0x12, 0x02, 0x00, 0x00},
		"resource name past it":   {0x12, 0x02, 0x1a, 0x05, 'a', 'b', 'c'},
		"resource group open":     {0x12, 0x02, 0x0b, 0x08, 0x01},
		"resource varint cut":     {0x12, 0x02, 0x08, 0x80, 0x01},
		"resource fixed32 cut":    {0x12, 0x03, 0x0d, 1, 2, 3, 4},
		"resource key cut":        {0x12, 0x01, 0x80, 0x01},
		"resource wire type 4":    {0x12, 0x01, 0x0c},
		"removed past end":        {0x32, 0x03, 'a'},
		"delta good cut":          goodDelta[:len(goodDelta)-2],
		"resource ends in string": {0x12, 0x03, 0x0a, 0x02, 'a', 'b'},
	}
	run := func(cases map[string][]byte, delta bool) {
		for name, msg := range cases {
			t.Run(name, func(t *testing.T) {
				got := checkSplits(t, msg, delta)
				if name == "groups deep but ok" {
					if got.err != "" {
						t.Fatalf("refused: %s", got.err)
					}
					return
				}
				if got.err == "" {
					t.Fatalf("%x accepted", msg)
				}
			})
		}
	}
	run(cases, false)
	run(cases, true)
	run(deltaCases, true)
}

func TestScanSizeMismatch(t *testing.T) {
	msg := marshal(t, sampleResponse(2))
	var s ResponseScanner
	s.Reset(false, len(msg)+1, nil)
	if err := s.Feed(msg); err != nil {
		t.Fatal(err)
	}
	var r Response
	if err := s.FinishSotW(&r); !errors.Is(err, ErrTruncated) {
		t.Fatalf("finish one byte short: %v, want ErrTruncated", err)
	}
	s.Reset(false, len(msg)-1, nil)
	if err := s.Feed(msg); err == nil {
		t.Fatal("one byte too many accepted")
	}
	if err := s.FinishSotW(&r); err == nil {
		t.Fatal("finish after an error succeeded")
	}
	s.Reset(true, len(msg), nil)
	if err := s.Feed(msg); err != nil {
		t.Fatal(err) // a SotW response reads as a delta one too: resources are skipped as Resources
	}
	if err := s.FinishSotW(&r); err == nil {
		t.Fatal("delta scan finished as SotW")
	}
}

// TestScanEarlyTypeURL checks that the type URL is known right after the first Any's type_url
// has passed, in both kinds, before the resource bodies and the top-level field.
func TestScanEarlyTypeURL(t *testing.T) {
	sotw := marshal(t, sampleResponse(40))
	delta := marshal(t, &discovery.DeltaDiscoveryResponse{TypeUrl: EndpointType, Nonce: "n",
		Resources: []*discovery.Resource{{Name: "e", Version: "1", Resource: &anypb.Any{TypeUrl: EndpointType, Value: make([]byte, 4000)}}}})
	custom := "type.example.com/not.Known"
	noTop := marshal(t, &discovery.DiscoveryResponse{Resources: []*anypb.Any{{TypeUrl: custom, Value: make([]byte, 900)}}})
	for _, tc := range []struct {
		name  string
		msg   []byte
		delta bool
		want  string
	}{{"sotw", sotw, false, ClusterType}, {"delta", delta, true, EndpointType}, {"unknown type", noTop, false, custom}} {
		// proto.Marshal writes resources before type_url: the first occurrence of the URL is
		// the first Any's.
		at := bytes.Index(tc.msg, []byte(tc.want)) + len(tc.want)
		if at >= len(tc.msg)-len(tc.want) {
			t.Fatalf("%s: the Any's type URL is not early in the message", tc.name)
		}
		var s ResponseScanner
		_, earlyAt, early := scanPieces(&s, tc.msg, tc.delta, ones(len(tc.msg)))
		if earlyAt != at || early != tc.want {
			t.Errorf("%s: EarlyTypeURL %q after %d bytes, want %q after %d", tc.name, early, earlyAt, tc.want, at)
		}
	}
	var s ResponseScanner
	// A malformed Any gives no hint, and no error: the top-level field gives it later.
	bad := raw(func(b []byte) []byte {
		b = protowire.AppendTag(b, respResource, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte{0x0a, 0x7f, 'x'})
		b = protowire.AppendTag(b, respTypeURL, protowire.BytesType)
		return protowire.AppendString(b, RouteType)
	})
	_, earlyAt, early := scanPieces(&s, bad, false, ones(len(bad)))
	if earlyAt != len(bad) || early != RouteType {
		t.Fatalf("malformed Any: EarlyTypeURL %q after %d bytes, want %q at the end", early, earlyAt, RouteType)
	}
}

// TestScanAllocs checks the steady state: a reused scanner allocates nothing for a message whose
// version and nonce repeat the previous message's (a new nonce or version costs one string each,
// as with Peeker). Type URLs alternate, so only interning keeps them free.
func TestScanAllocs(t *testing.T) {
	sotwMsg := sampleResponse(200)
	sotw := marshal(t, sotwMsg)
	sotwMsg.TypeUrl = ListenerType
	for _, r := range sotwMsg.Resources {
		r.TypeUrl = ListenerType
	}
	sotw2 := marshal(t, sotwMsg)
	delta := marshal(t, &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "n", SystemVersionInfo: "v",
		Resources:        []*discovery.Resource{{Name: "a-name", Version: "1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: make([]byte, 3000)}}},
		RemovedResources: []string{"gone"}})
	var s ResponseScanner
	names := 0
	visit := func(NameKind, []byte, []byte) { names++ }
	for _, tc := range []struct {
		msgs  [][]byte
		delta bool
	}{{[][]byte{sotw, sotw2}, false}, {[][]byte{delta}, true}} {
		i := 0
		feed := func() {
			msg := tc.msgs[i%len(tc.msgs)]
			i++
			s.Reset(tc.delta, len(msg), visit)
			for b := msg; len(b) > 0; b = b[min(len(b), 700):] {
				if err := s.Feed(b[:min(len(b), 700)]); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if tc.delta {
				var r DeltaResponse
				err = s.FinishDelta(&r)
			} else {
				var r Response
				err = s.FinishSotW(&r)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		feed()
		if allocs := testing.AllocsPerRun(100, feed); allocs != 0 {
			t.Errorf("delta=%t: %.1f allocs per message, want 0", tc.delta, allocs)
		}
	}
}

// FuzzScanResponse splits the input pseudo-randomly and checks the scan against Peeker on the
// whole message (one piece): same error text or the same fields and visited names.
func FuzzScanResponse(f *testing.F) {
	f.Add(marshal(f, sampleResponse(3)), false, uint64(1))
	f.Add(append(unknownFields(nil), 0x22, 0x01, 'x'), false, uint64(2))
	f.Add(marshal(f, &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "n", RemovedResources: []string{"r"},
		Resources: []*discovery.Resource{{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte("x")}}}}), true, uint64(3))
	odd := protowire.AppendBytes(protowire.AppendTag(nil, resResource, protowire.BytesType), []byte{0x0b, 0x0c, 0x0a, 0x01, 't'})
	odd = append(unknownFields(odd), 0x1a, 0x00)
	f.Add(append(unknownFields(protowire.AppendBytes([]byte{0x12}, odd)), 0x32, 0x00), true, uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, delta bool, seed uint64) {
		want := peekWhole(data, delta)
		var s ResponseScanner
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		pieces := randomPieces(len(data), rng)
		if seed%5 == 0 {
			pieces = ones(len(data))
		}
		got, _, _ := scanPieces(&s, data, delta, pieces)
		if !got.equal(want) {
			t.Fatalf("pieces %v:\n got %v\nwant %v", pieces, got, want)
		}
		if want.err != "" {
			return
		}
		// The hint: the top-level type URL once seen; else, when the reference decoder reads a
		// type URL in the first resource's Any, that one must have been found.
		early, ok := s.EarlyTypeURL()
		top := want.sotw.TypeURL
		if delta {
			top = want.delta.TypeURL
		}
		if top != "" && (!ok || early != top) {
			t.Fatalf("EarlyTypeURL %q %t after the whole message, type_url %q", early, ok, top)
		}
		if delta {
			var ref discovery.DeltaDiscoveryResponse
			if proto.Unmarshal(data, &ref) == nil && !ok && len(ref.Resources) > 0 && ref.Resources[0].GetResource().GetTypeUrl() != "" &&
				len(ref.Resources[0].GetResource().GetTypeUrl()) <= maxPeekString {
				t.Fatalf("no EarlyTypeURL, reference reads %q", ref.Resources[0].GetResource().GetTypeUrl())
			}
			return
		}
		var ref discovery.DiscoveryResponse
		if proto.Unmarshal(data, &ref) == nil && !ok && len(ref.Resources) > 0 && ref.Resources[0].TypeUrl != "" &&
			len(ref.Resources[0].TypeUrl) <= maxPeekString {
			t.Fatalf("no EarlyTypeURL, reference reads %q", ref.Resources[0].TypeUrl)
		}
	})
}

// bigResponse is a 4 MiB SotW response of 2 KiB clusters, as Istiod would push it.
func bigResponse(b *testing.B) []byte {
	body := bytes.Repeat([]byte{0x5a}, 2048)
	var res [][]byte
	for range 2000 {
		res = append(res, AppendResource(nil, ClusterType, body))
	}
	return AppendResponse(nil, []byte("2026-12-03T04:00:00Z/17"), ClusterType, "nonce-1", res)
}

// bigDeltaResponse is the same push as a DeltaDiscoveryResponse.
func bigDeltaResponse(b *testing.B) []byte {
	r := &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "nonce-1", SystemVersionInfo: "2026-12-03T04:00:00Z/17"}
	body := bytes.Repeat([]byte{0x5a}, 2048)
	for i := range 2000 {
		r.Resources = append(r.Resources, &discovery.Resource{Name: fmt.Sprintf("outbound|8080||svc-%d.ns.svc.cluster.local", i),
			Version: "2026-12-03T04:00:00Z/17", Resource: &anypb.Any{TypeUrl: ClusterType, Value: body}})
	}
	return marshal(b, r)
}

// BenchmarkScanResponse feeds a 4 MiB response in 32 KiB pieces (HTTP/2 DATA frames); the peek
// of the same message whole, in the same 32 KiB buffers, is the same-run reference (".../peek-whole").
func BenchmarkScanResponse(b *testing.B) {
	msg := bigResponse(b)
	const piece = 32 << 10
	b.Run("size=4MB", func(b *testing.B) {
		var s ResponseScanner
		var r Response
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			s.Reset(false, len(msg), nil)
			for p := msg; len(p) > 0; p = p[min(len(p), piece):] {
				if err := s.Feed(p[:min(len(p), piece)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.FinishSotW(&r); err != nil || r.Resources != 2000 {
				b.Fatal(err, r)
			}
		}
	})
	dmsg := bigDeltaResponse(b)
	names := 0
	visit := func(NameKind, []byte, []byte) { names++ }
	b.Run("size=4MB/delta", func(b *testing.B) {
		var s ResponseScanner
		var r DeltaResponse
		b.SetBytes(int64(len(dmsg)))
		b.ReportAllocs()
		for b.Loop() {
			s.Reset(true, len(dmsg), visit)
			for p := dmsg; len(p) > 0; p = p[min(len(p), piece):] {
				if err := s.Feed(p[:min(len(p), piece)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.FinishDelta(&r); err != nil || r.Resources != 2000 {
				b.Fatal(err, r)
			}
		}
	})
	b.Run("size=4MB/delta/peek-whole", func(b *testing.B) {
		var p Peeker
		var r DeltaResponse
		bufs := split(dmsg, piece)
		b.SetBytes(int64(len(dmsg)))
		b.ReportAllocs()
		for b.Loop() {
			if err := p.PeekDeltaResponse(bufs, &r, visit); err != nil || r.Resources != 2000 {
				b.Fatal(err, r)
			}
		}
	})
	b.Run("size=4MB/peek-whole", func(b *testing.B) {
		var p Peeker
		var r Response
		bufs := split(msg, piece)
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if err := p.PeekResponse(bufs, &r); err != nil || r.Resources != 2000 {
				b.Fatal(err, r)
			}
		}
	})
}

// TestScanVisitAtResourceEnd checks that each Resource is reported as soon as its last byte has
// been fed (its name follows its body on the wire), and each removed name as soon as it has; the
// ends are found with protowire, the protobuf module's own wire reader.
func TestScanVisitAtResourceEnd(t *testing.T) {
	msg := marshal(t, &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "n", RemovedResources: []string{"gone"},
		Resources: []*discovery.Resource{
			{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: make([]byte, 300)}},
			{Name: "b", Version: "2", Resource: &anypb.Any{TypeUrl: ClusterType, Value: make([]byte, 20)}},
		}})
	var want []int
	for off := 0; off < len(msg); {
		num, typ, n := protowire.ConsumeTag(msg[off:])
		m := protowire.ConsumeFieldValue(num, typ, msg[off+n:])
		if n < 0 || m < 0 {
			t.Fatal("protowire cannot read the message")
		}
		off += n + m
		if num == drespResources || num == drespRemoved {
			want = append(want, off)
		}
	}
	var s ResponseScanner
	var got []int
	s.Reset(true, len(msg), func(NameKind, []byte, []byte) { got = append(got, s.Fed()) })
	for i := range msg {
		if err := s.Feed(msg[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("visited after %v bytes, want %v", got, want)
	}
}

package merge

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// refCopy is the obvious, buffering version of copyLines for a body read without error.
func refCopy(body []byte, limit int64, om bool) (string, bool) {
	if om {
		// An OpenMetrics body ends at its "# EOF" line: when that whole line is within the limit,
		// what follows is never read, so nothing is cut.
		off := 0
		for _, l := range strings.SplitAfter(string(body), "\n") {
			off += len(l)
			if int64(off) > limit {
				break
			}
			if strings.HasSuffix(l, "\n") && refIsEOF(l) {
				return refCopyAll(body[:off-len(l)]), false
			}
		}
	}
	cut := int64(len(body)) >= limit
	if cut {
		body = body[:limit]
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			body = body[:i+1]
		} else {
			body = nil
		}
	}
	var out strings.Builder
	lines := strings.SplitAfter(string(body), "\n")
	for _, l := range lines {
		if l == "" {
			continue
		}
		if om && refIsEOF(l) && (strings.HasSuffix(l, "\n") || !cut) {
			break
		}
		out.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n")
		}
	}
	return out.String(), cut
}

// refCopyAll is every line of body, each ended by a newline.
// refIsEOF: the line (with its newline, if any) is OpenMetrics' "# EOF", ended by LF or CRLF. One
// CR only: "# EOF\r\r" is another line (FuzzCopyLines found the reference taking any number).
func refIsEOF(l string) bool {
	return strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r") == "# EOF"
}

func refCopyAll(body []byte) string {
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(body), "\n") {
		if l == "" {
			continue
		}
		out.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n")
		}
	}
	return out.String()
}

func TestCopyLines(t *testing.T) {
	cases := []struct {
		in    string
		limit int64
		om    bool
		want  string
		cut   bool
	}{
		{"a 1\nb 2\n", 100, false, "a 1\nb 2\n", false},
		{"a 1\nb 2", 100, false, "a 1\nb 2\n", false},
		{"a 1\n# EOF\n", 100, true, "a 1\n", false},
		{"a 1\n# EOF", 100, true, "a 1\n", false},
		{"a 1\n# EOF\r\n", 100, true, "a 1\n", false},
		{"a 1\n# EOF\r\r\nb 2\n", 100, true, "a 1\n# EOF\r\r\nb 2\n", false},
		{"# EOF\r\r", 100, true, "# EOF\r\r\n", false},
		{"a 1\n# EOF\n", 100, false, "a 1\n# EOF\n", false},
		{"a 1\n# EOFx\n# EOF\nafter 1\n", 100, true, "a 1\n# EOFx\n", false},
		{"x # EOF\n", 100, true, "x # EOF\n", false},
		{"a 1\nbbbbbbbbbb 2\n", 8, false, "a 1\n", true},
		{"", 100, false, "", false},
	}
	for _, c := range cases {
		for _, bufLen := range []int{4, 7, 64} {
			var out bytes.Buffer
			_, err := copyLines(&out, iotest.OneByteReader(strings.NewReader(c.in)), c.limit, c.om, make([]byte, bufLen))
			if bufLen >= 8 && out.String() != c.want {
				t.Errorf("copyLines(%q, limit %d, om %v, buf %d) = %q, want %q", c.in, c.limit, c.om, bufLen, out.String(), c.want)
			}
			if (errors.Is(err, errTooLarge)) != c.cut || (err != nil && !errors.Is(err, errTooLarge)) {
				t.Errorf("copyLines(%q, limit %d) error %v, want cut=%v", c.in, c.limit, err, c.cut)
			}
		}
	}
}

// A body cut by a read error loses only its incomplete last line.
func TestCopyLinesErrorDropsPartialLine(t *testing.T) {
	src := io.MultiReader(strings.NewReader("a 1\nb 2\nhalf_a_li"), iotest.ErrReader(errors.New("reset")))
	var out bytes.Buffer
	_, err := copyLines(&out, src, 1<<20, false, make([]byte, 64))
	if err == nil || out.String() != "a 1\nb 2\n" {
		t.Errorf("got %q, %v; want the whole lines and the read error", out.String(), err)
	}
}

func FuzzCopyLines(f *testing.F) {
	f.Add([]byte("a 1\n# EOF\n"), int64(100), true, uint8(8))
	f.Add([]byte("a 1\nbbbbbbbbbbbbbbbbbbbb 2\n"), int64(12), false, uint8(5))
	f.Add([]byte("# EOF"), int64(3), true, uint8(3))
	f.Fuzz(func(t *testing.T, body []byte, limit int64, om bool, bufLen uint8) {
		if limit <= 0 || limit > 1<<16 {
			limit = 1 << 16
		}
		// With a buffer longer than every line, the stream equals the reference.
		n := 1 + int(bufLen)
		longest := 0
		for l := range bytes.SplitSeq(body, []byte("\n")) {
			longest = max(longest, len(l)+1)
		}
		var out bytes.Buffer
		_, err := copyLines(&out, iotest.HalfReader(bytes.NewReader(body)), limit, om, make([]byte, n))
		if err != nil && !errors.Is(err, errTooLarge) {
			t.Fatal(err)
		}
		if n <= longest {
			if int64(out.Len()) > limit+int64(bytes.Count(out.Bytes(), newline)) {
				t.Fatalf("wrote %d bytes for limit %d", out.Len(), limit)
			}
			return
		}
		want, cut := refCopy(body, limit, om)
		if out.String() != want || errors.Is(err, errTooLarge) != cut {
			t.Fatalf("copyLines(%q, %d, %v, %d) = %q, %v; reference %q, cut %v", body, limit, om, n, out.String(), err, want, cut)
		}
	})
}

func TestFilterAccept(t *testing.T) {
	prom := "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7," +
		"application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
	for _, c := range []struct {
		in   string
		om   bool
		want string
	}{
		{prom, true, "application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3,text/plain;version=0.0.4;q=0.2"},
		{prom, false, "text/plain;version=0.0.4;q=0.3,text/plain;version=0.0.4;q=0.2"},
		{"application/*;q=0.5", true, "application/openmetrics-text;version=0.0.1;q=0.5"},
		{"application/*;q=0.5", false, ""},
		{"application/json", true, ""},
		{"", true, ""},
	} {
		if got := filterAccept(c.in, c.om); got != c.want {
			t.Errorf("filterAccept(%q, %v) = %q, want %q", c.in, c.om, got, c.want)
		}
	}
}

func TestParseAnnotations(t *testing.T) {
	got, err := ParseAnnotations([]byte(`{"scrape":"true","path":"stats","port":"8080"}`), 15020)
	if err != nil || len(got) != 1 || got[0] != (Target{8080, "/stats"}) {
		t.Errorf("single target: %v %v", got, err)
	}
	got, err = ParseAnnotations([]byte(`{"scrape":"true"}`), 15020)
	if err != nil || len(got) != 1 || got[0] != (Target{80, "/metrics"}) {
		t.Errorf("defaults: %v %v", got, err)
	}
	got, err = ParseAnnotations([]byte(`{"targets":[{"port":"9000"},{"port":9001,"path":"/m"}]}`), 15020)
	if err != nil || len(got) != 2 || got[1] != (Target{9001, "/m"}) || got[0] != (Target{9000, "/metrics"}) {
		t.Errorf("targets: %v %v", got, err)
	}
	if got, err := ParseAnnotations([]byte(`{"scrape":"false","port":"8080"}`), 15020); err != nil || got != nil {
		t.Errorf("scrape false: %v %v", got, err)
	}
	for _, bad := range []string{`{"port":"15020"}`, `{"port":"15090"}`, `{"port":"7000"}`, `{"port":"http"}`, `{"targets":[{"port":"0"}]}`, `{`} {
		if _, err := ParseAnnotations([]byte(bad), 7000); err == nil {
			t.Errorf("ParseAnnotations(%s) accepted", bad)
		}
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add([]byte(`{"scrape":"true","path":"/m","port":"8080","targets":[{"port":"1","path":"x"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ts, err := ParseAnnotations(doc, 15020)
		if err != nil {
			return
		}
		for _, tg := range ts {
			if tg.Port < 1 || tg.Port > 65535 || reservedPorts[tg.Port] || !strings.HasPrefix(tg.Path, "/") {
				t.Fatalf("accepted bad target %+v", tg)
			}
		}
	})
}

// copyLines itself allocates nothing: the buffer is the caller's and the writes go straight out.
func TestCopyLinesAllocs(t *testing.T) {
	body := bytes.Repeat([]byte("metric_a{x=\"y\"} 1\n"), 10000)
	buf := make([]byte, bufSize)
	rd := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		rd.Reset(body)
		if _, err := copyLines(io.Discard, rd, 1<<30, true, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("copyLines allocated %v times per body, want 0", allocs)
	}
}

package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

const traces = `File: x
Duration: 1s, Total samples = 40ms
-----------+-------------------------------------------------------
      30ms   leaf.a
             mid.b (inline)
             root.c
-----------+-------------------------------------------------------
      10ms   mid.b
             root.c
-----------+-------------------------------------------------------
`

// TestMergesStacksRootFirst: two traces through root.c → mid.b merge into one tree whose frame
// values include their callees', and the SVG is well-formed with one titled frame per node.
func TestMergesStacksRootFirst(t *testing.T) {
	root, err := parse(strings.NewReader(traces))
	if err != nil {
		t.Fatal(err)
	}
	if root.value != 40*time.Millisecond || len(root.children) != 1 {
		t.Fatalf("root %v with %d children, want 40ms and one", root.value, len(root.children))
	}
	c := root.children[0]
	b := c.children[0]
	if c.name != "root.c" || c.value != 40*time.Millisecond || b.name != "mid.b" || b.value != 40*time.Millisecond ||
		len(b.children) != 1 || b.children[0].name != "leaf.a" || b.children[0].value != 30*time.Millisecond {
		t.Fatalf("tree %+v / %+v / %+v, want root.c 40ms → mid.b 40ms → leaf.a 30ms", c, b, b.children)
	}
	var out bytes.Buffer
	if err := draw(&out, root, "t"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&out)
	titles := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "title" {
			titles++
		}
	}
	if titles != 4 { // all, root.c, mid.b, leaf.a
		t.Errorf("%d frames drawn, want 4", titles)
	}
	if _, err := parse(strings.NewReader("File: x\n")); err == nil {
		t.Error("input without samples accepted")
	}
}

// TestTableCountsEachSampleOnce: samples fall into the first matching kind of work, a window
// update's write counted as a window update, not as a socket write; a transport lock taken
// under mux is the transport's, mux's own scanning mux's.
func TestTableCountsEachSampleOnce(t *testing.T) {
	const in = `-----------+-------------------------------------------------------
      20ms   syscall.write
             h2grpc.(*conn).writeWindowUpdate
             main.x
-----------+-------------------------------------------------------
      10ms   syscall.write
             main.y
-----------+-------------------------------------------------------
      5ms   runtime.memmove
             main.y
-----------+-------------------------------------------------------
      4ms   sync.(*Mutex).Lock
             github.com/wingman-mesh/wingman/transport/h2grpc.(*recvStream).take
             github.com/wingman-mesh/wingman/mux.(*responseReader).stream
-----------+-------------------------------------------------------
      6ms   github.com/wingman-mesh/wingman/fastpath.(*ResponseScanner).Feed
             github.com/wingman-mesh/wingman/mux.(*responseReader).stream
-----------+-------------------------------------------------------
`
	root, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTable(&out, root); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| window updates (WINDOW_UPDATE frames written, their TLS record and write) | 20ms | 44.4 % |",
		"| socket writes (to Envoy; ACKs to Istiod) | 10ms | 22.2 % |", "| copies (memmove) | 5ms | 11.1 % |",
		"| xDS bookkeeping (mux, fastpath: scanning, nonces, queues) | 6ms | 13.3 % |",
		"| HTTP/2 framing and the rest of the transport (locks, stream hand-off) | 4ms | 8.9 % |", "| all | 45ms | 100 % |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// Command flame draws a flame graph (SVG) of a CPU profile from the stack traces `go tool pprof
// -traces` prints, so that no tool outside the Go distribution is needed:
//
//	go tool pprof -traces PROFILE | go run ./perf/cmd/flame -title TITLE > flame.svg
//
// Each sample's stack is drawn root at the bottom, callee above its caller; a frame's width is
// its share of all samples, and hovering it (the SVG title) shows its name, time and share.
//
// With -table it prints instead a markdown table of where the samples went by kind of work
// (TLS decryption, socket reads and writes, window updates, scheduler wake-ups, copies, ...;
// see categories), each sample counted once, so that perf/results/profile-binary.md can set
// the agent's CPU per MB beside the floor forwarder's, line by line.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	title := flag.String("title", "CPU profile", "title above the graph")
	table := flag.Bool("table", false, "print the samples' shares by kind of work (markdown) instead of the graph")
	flag.Parse()
	root, err := parse(os.Stdin)
	if err == nil {
		if *table {
			err = printTable(os.Stdout, root)
		} else {
			err = draw(os.Stdout, root, *title)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flame:", err)
		os.Exit(1)
	}
}

// node is a frame in the merged call tree: its samples include its callees'.
type node struct {
	name     string
	value    time.Duration
	children []*node
}

func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	c := &node{name: name}
	n.children = append(n.children, c)
	return c
}

// parse reads -traces output: blocks between separator lines, the first line of each holding
// the sample's value and the leaf frame, the next lines its callers.
func parse(r io.Reader) (*node, error) {
	root := &node{name: "all"}
	var stack []string
	var value time.Duration
	flush := func() {
		if len(stack) == 0 {
			return
		}
		n := root
		n.value += value
		for i := len(stack) - 1; i >= 0; i-- {
			n = n.child(stack[i])
			n.value += value
		}
		stack = stack[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			in = true
			continue
		}
		if !in || strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(stack) == 0 {
			d, err := parseValue(fields[0])
			if err != nil {
				return nil, fmt.Errorf("trace value %q: %w", fields[0], err)
			}
			value, fields = d, fields[1:]
		}
		if len(fields) > 0 {
			stack = append(stack, fields[0])
		}
	}
	flush()
	if root.value == 0 {
		return nil, fmt.Errorf("no samples in the input (expected `go tool pprof -traces` output)")
	}
	return root, sc.Err()
}

// parseValue reads pprof's sample values: 10ms, 1.20s, 500us.
func parseValue(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	f, err := strconv.ParseFloat(s, 64) // a bare count
	return time.Duration(f), err
}

const (
	width  = 1200
	rowH   = 16
	top    = 40
	minPix = 0.5 // frames narrower than this are not drawn
)

func draw(w io.Writer, root *node, title string) error {
	depth := maxDepth(root)
	height := top + (depth+1)*rowH + 10
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="11">`+"\n", width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#fdfdf6"/>`+"\n")
	fmt.Fprintf(b, `<text x="10" y="18" font-size="14" font-family="sans-serif">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(b, `<text x="10" y="32" font-family="sans-serif">%v of samples; width is the share of CPU time, callers below callees; hover a frame for its figures</text>`+"\n", root.value)
	scale := float64(width-20) / float64(root.value)
	var walk func(n *node, x float64, level int)
	walk = func(n *node, x float64, level int) {
		wpx := float64(n.value) * scale
		if wpx < minPix {
			return
		}
		y := height - 10 - (level+1)*rowH
		share := 100 * float64(n.value) / float64(root.value)
		fmt.Fprintf(b, `<g><title>%s: %v (%.1f%%)</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="white" stroke-width="0.5"/>`,
			html.EscapeString(n.name), n.value, share, x, y, wpx, rowH-1, color(n.name))
		if chars := int(wpx / 6.6); chars >= 3 {
			label := short(n.name)
			if len(label) > chars {
				label = label[:chars-2] + ".."
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`, x+2, y+rowH-4, html.EscapeString(label))
		}
		b.WriteString("</g>\n")
		kids := slices.Clone(n.children)
		slices.SortFunc(kids, func(a, c *node) int { return strings.Compare(a.name, c.name) })
		for _, c := range kids {
			walk(c, x, level+1)
			x += float64(c.value) * scale
		}
	}
	walk(root, 10, 0)
	b.WriteString("</svg>\n")
	return b.Flush()
}

func maxDepth(n *node) int {
	d := 0
	for _, c := range n.children {
		d = max(d, 1+maxDepth(c))
	}
	return d
}

// short drops the module path from a frame's name.
func short(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// color groups frames by where they live: Wingman's packages, TLS and crypto, the runtime and
// syscalls, the rest.
func color(name string) string {
	switch {
	case strings.Contains(name, "wingman-mesh/wingman/mux"), strings.Contains(name, "wingman/fastpath"):
		return "#e8a33d"
	case strings.Contains(name, "wingman-mesh/wingman"), strings.HasPrefix(name, "main."):
		return "#f2c94c"
	case strings.HasPrefix(name, "crypto/"):
		return "#d65f5f"
	case strings.HasPrefix(name, "runtime."), strings.HasPrefix(name, "internal/runtime"):
		return "#8fb8de"
	case strings.HasPrefix(name, "syscall."), strings.HasPrefix(name, "internal/poll"), strings.HasPrefix(name, "net."):
		return "#9bc995"
	default:
		return "#c7c7c7"
	}
}

// category is a kind of work: a sample is the first category (in order) one of whose frames
// is on its stack (leaf is matched against the sample's leaf frame only). Categories marked
// nearest are tried last, together, from the leaf up: the sample goes to the one whose frame
// is nearest its leaf (a transport read called by mux is the transport's, mux's own scanning
// is mux's).
type category struct {
	name    string
	frame   []string // any frame of the stack containing one of these
	leaf    []string // or the leaf frame containing one of these
	nearest bool
}

var categories = []category{
	{name: "window updates (WINDOW_UPDATE frames written, their TLS record and write)", frame: []string{").writeWindowUpdate", ").grantConnWindow", ").credit"}},
	{name: "garbage collection", frame: []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart"}},
	{name: "scheduler: waking, parking and finding goroutines (futex, netpoll)", frame: []string{"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m", "runtime.wakep", "runtime.futexwakeup", "runtime.futexsleep", "runtime.startm", "runtime.stopm", "runtime.notewakeup"}},
	{name: "TLS decryption (AES-GCM) of Istiod's records", frame: []string{"crypto/tls.(*halfConn).decrypt"}},
	{name: "TLS encryption (requests, ACKs)", frame: []string{"crypto/tls.(*halfConn).encrypt"}},
	{name: "socket reads (TLS from Istiod)", frame: []string{"syscall.read", "syscall.Read"}},
	{name: "socket writes (to Envoy; ACKs to Istiod)", frame: []string{"syscall.write", "syscall.Write"}},
	{name: "buffer clearing (gRPC's pool)", frame: []string{"sizedBufferPool).Get"}},
	{name: "copies (memmove)", leaf: []string{"runtime.memmove"}},
	{name: "allocation", frame: []string{"runtime.mallocgc"}},
	{name: "xDS bookkeeping (mux, fastpath: scanning, nonces, queues)", frame: []string{"wingman/mux.", "wingman/fastpath."}, nearest: true},
	{name: "HTTP/2 framing and the rest of the transport (locks, stream hand-off)", frame: []string{"wingman/transport/", "golang.org/x/net/http2", "main.relay", "main.(*hop)", "main.pair"}, nearest: true},
	{name: "TLS record handling", frame: []string{"crypto/tls."}, nearest: true},
}

// printTable walks every sample path of the tree and sums it into its category.
func printTable(w io.Writer, root *node) error {
	sums := make([]time.Duration, len(categories)+1)
	var stack []string
	var walk func(n *node)
	walk = func(n *node) {
		stack = append(stack, n.name)
		self := n.value
		for _, c := range n.children {
			self -= c.value
			walk(c)
		}
		if self > 0 {
			sums[classify(stack)] += self
		}
		stack = stack[:len(stack)-1]
	}
	for _, c := range root.children {
		walk(c)
	}
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "| kind of work | samples | share |\n|---|---:|---:|\n")
	for i, d := range sums {
		name := "other"
		if i < len(categories) {
			name = categories[i].name
		}
		fmt.Fprintf(b, "| %s | %v | %.1f %% |\n", name, d, 100*float64(d)/float64(root.value))
	}
	fmt.Fprintf(b, "| all | %v | 100 %% |\n", root.value)
	return b.Flush()
}

// classify returns the index of the first category of a stack (root first), len(categories)
// for none.
func classify(stack []string) int {
	leaf := stack[len(stack)-1]
	for i, c := range categories {
		if c.nearest {
			continue
		}
		for _, l := range c.leaf {
			if strings.Contains(leaf, l) {
				return i
			}
		}
		for _, f := range stack {
			for _, m := range c.frame {
				if strings.Contains(f, m) {
					return i
				}
			}
		}
	}
	for j := len(stack) - 1; j >= 0; j-- {
		for i, c := range categories {
			if !c.nearest {
				continue
			}
			for _, m := range c.frame {
				if strings.Contains(stack[j], m) {
					return i
				}
			}
		}
	}
	return len(categories)
}

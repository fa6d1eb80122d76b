package h2grpc

import (
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// h2specFloor is the least number of h2spec cases (of 145 generic and HTTP/2 cases, h2spec
// v2.2.1, the tool directive in go.mod) this server must pass. Raise it when the server gets
// better; it never goes down.
const h2specFloor = 131

// h2specNeedsBody are the cases x/net passes that need the response to a request h2spec
// makes (GET /, no gRPC content-type) to carry DATA, held back by a zero flow-control window:
// this server answers such a request as grpc-go does (writeEarlyAbort in grpc-go's
// http2_server.go: 415, trailers only), so there is no DATA to hold. The same rules for gRPC
// streams, which have bodies, are tested in server_h2_test.go by the tests named.
var h2specNeedsBody = map[string]string{
	"generic/2/2 Sends a WINDOW_UPDATE frame on half-closed (remote) stream":                                 "TestServerHonoursPeerWindow",
	"generic/2/3 Sends a PRIORITY frame on half-closed (remote) stream":                                      "TestServerHonoursPeerWindow",
	"http2/5.1.2/1 Sends HEADERS frames that causes their advertised concurrent stream limit to be exceeded": "TestServerRefusesStreamsOverTheLimit",
	"http2/6.9.1/1 Sends SETTINGS frame to set the initial window size to 1 and sends HEADERS frame":         "TestServerHonoursPeerWindow",
	"http2/6.9.2/1 Changes SETTINGS_INITIAL_WINDOW_SIZE after sending HEADERS frame":                         "TestServerNegativeWindow",
}

// TestH2spec runs h2spec, the HTTP/2 conformance suite, against this package's server (default
// options) and, in the same run as the reference, against x/net/http2's server on a
// prior-knowledge connection. It fails when a case x/net passes fails here, or when fewer
// cases than h2specFloor pass.
func TestH2spec(t *testing.T) {
	if testing.Short() {
		t.Skip("runs h2spec twice (builds it on first use)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("h2spec runs as 'go tool h2spec': %v", err)
	}

	ours := h2specListener(t)
	s := NewServer(t.Context(), ServerConfig{}, map[string]Handler{"/": echoHandler})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ours) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	ref := h2specListener(t)
	refDone := xnetH2c(t, ref)

	// One after the other: the two runs share the machine's two cores with everything else.
	oursRes := runH2spec(t, goBin, ours.Addr())
	refRes := runH2spec(t, goBin, ref.Addr())
	ref.Close()
	refDone()

	var oursPass, refPass int
	var regress []string
	names := make([]string, 0, len(refRes))
	for name := range refRes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if refRes[name] == "" {
			refPass++
		}
		got, ok := oursRes[name]
		if !ok {
			t.Errorf("h2spec ran %q against x/net only", name)
			continue
		}
		if got == "" {
			oursPass++
		}
		if _, ok := h2specNeedsBody[name]; ok {
			continue
		}
		if refRes[name] == "" && got != "" {
			regress = append(regress, fmt.Sprintf("%s:\n%s", name, got))
		}
	}
	t.Logf("h2spec: h2grpc passed %d of %d, x/net/http2 %d", oursPass, len(oursRes), refPass)
	for _, r := range regress {
		t.Errorf("x/net passes, h2grpc fails: %s", r)
	}
	if oursPass < h2specFloor {
		t.Errorf("h2grpc passed %d h2spec cases, floor %d", oursPass, h2specFloor)
	}
	if len(oursRes) != len(refRes) {
		t.Errorf("h2spec ran %d cases against h2grpc, %d against x/net", len(oursRes), len(refRes))
	}
}

func h2specListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// xnetH2c serves x/net/http2's server with prior knowledge on l, as this package's server is
// served; the returned func waits for its connections after l is closed.
func xnetH2c(t *testing.T, l net.Listener) (wait func()) {
	h2 := &http2.Server{}
	base := &http.Server{ErrorLog: log.New(io.Discard, "", 0)} // h2spec's errors are expected
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				h2.ServeConn(c, &http2.ServeConnOpts{Handler: h, BaseConfig: base})
				c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	return func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// runH2spec runs h2spec's generic and HTTP/2 sections against addr and returns each case's
// result, keyed by section and description: "" when it passed, else h2spec's report of it.
func runH2spec(t *testing.T, goBin string, addr net.Addr) map[string]string {
	t.Helper()
	port := addr.(*net.TCPAddr).Port
	report := filepath.Join(t.TempDir(), "junit.xml")
	// -o: seconds h2spec waits for an expected frame; loaded CI machines need more than its 2.
	cmd := exec.CommandContext(t.Context(), goBin, "tool", "h2spec", "generic", "http2",
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-o", "5", "-j", report)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("go tool h2spec: %v\n%s", err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("h2spec left no report (%v):\n%s", err, out)
	}
	var r struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Desc    string `xml:"classname,attr"`
				Failure *struct {
					Text string `xml:",innerxml"`
				} `xml:"failure"`
				Error *struct {
					Text string `xml:",innerxml"`
				} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &r); err != nil {
		t.Fatalf("h2spec report: %v", err)
	}
	res := map[string]string{}
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			name := fmt.Sprintf("%s/%d %s", s.Package, i+1, c.Desc)
			switch {
			case c.Failure != nil:
				res[name] = "failed: " + c.Failure.Text
			case c.Error != nil:
				res[name] = "error: " + c.Error.Text
			case c.Skipped != nil:
				res[name] = "skipped"
			default:
				res[name] = ""
			}
		}
	}
	if len(res) == 0 {
		t.Fatalf("h2spec ran no case:\n%s", out)
	}
	return res
}

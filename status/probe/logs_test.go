package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/internal/syncbuf"
)

// TestFailuresLoggedAsIstio: a failed HTTP probe is an error in Istio's words (its probes scope:
// pilot/cmd/pilot-agent/status/server.go handleAppProbeHTTPGet at 1.30.3); a failed TCP probe
// is not logged at info or above (Istio logs none).
func TestFailuresLoggedAsIstio(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	var out syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	doc := fmt.Sprintf(`{"/app-health/web/readyz": {"httpGet": {"path": "ready", "port": %d}}, "/app-health/db/readyz": {"tcpSocket": {"port": %d}}}`, port, port)
	run := probeApp(t, doc, Config{Logger: log})
	if code, _ := run("/app-health/web/readyz", nil); code != 500 {
		t.Errorf("http to a closed port: %d", code)
	}
	got := out.String()
	want := `level=ERROR msg="Request to probe app failed: Get \"http://127.0.0.1:` + fmt.Sprint(port) + `/ready\": `
	if !strings.Contains(got, want) || !strings.Contains(got, `, original URL path = /app-health/web/readyz\napp URL path = /ready"`) {
		t.Errorf("logged %q, want %q ... original URL path = /app-health/web/readyz\\napp URL path = /ready", got, want)
	}
	before := len(out.String())
	if code, _ := run("/app-health/db/readyz", nil); code != 500 {
		t.Errorf("tcp to a closed port: %d", code)
	}
	if s := out.String()[before:]; s != "" {
		t.Errorf("tcp failure logged: %q", s)
	}
}

// TestGRPCFailureLines: Istio's lines per status code (handleAppProbeGRPC at 1.30.3).
func TestGRPCFailureLines(t *testing.T) {
	for err, want := range map[error]string{
		status.Error(codes.Unimplemented, "x"):    "server does not implement the grpc health protocol (grpc.health.v1.Health): rpc error: code = Unimplemented desc = x",
		status.Error(codes.DeadlineExceeded, "y"): "grpc request not finished within timeout: rpc error: code = DeadlineExceeded desc = y",
		status.Error(codes.Unavailable, "z"):      "grpc probe failed: rpc error: code = Unavailable desc = z",
		errors.New("plain"):                       "grpc probe failed: plain",
	} {
		if got := grpcFailure(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/internal/syncbuf"
	"github.com/wingman-mesh/wingman/lab/meshlab"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunErrors(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "c.yaml"), []byte("kind: Cluster\nname: a\nconect_timeout: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "-resources is required"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"-resources", bad}, 1, "c.yaml: document 1 (line 1): Cluster: field conect_timeout: unknown field"},
		{[]string{"-resources", filepath.Join(bad, "missing")}, 1, "read resources dir"},
	} {
		var out syncbuf.Buffer
		if code := run(t.Context(), tc.args, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("meshlab %q: exit %d, output %q; want exit %d and %q", tc.args, code, out.String(), tc.code, tc.want)
		}
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("kind: Cluster\nname: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var log syncbuf.Buffer
	codec := make(chan int, 1)
	go func() {
		codec <- run(ctx, []string{"-listen", "127.0.0.1:0", "-resources", dir, "-out", out, "-token", "t0k"}, &log)
	}()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(log.String(), "serving xDS and CA") {
		select {
		case <-deadline.C:
			t.Fatalf("meshlab never said it serves; log:\n%s", log.String())
		case code := <-codec:
			t.Fatalf("meshlab exited %d; log:\n%s", code, log.String())
		case <-tick.C:
		}
	}
	if tok, err := os.ReadFile(filepath.Join(out, meshlab.TokenPath)); err != nil || string(tok) != "t0k" {
		t.Errorf("token file: %q, %v", tok, err)
	}
	if _, err := os.Stat(filepath.Join(out, meshlab.RootCertPath)); err != nil {
		t.Errorf("root cert: %v", err)
	}
	cancel()
	if code := <-codec; code != 0 {
		t.Errorf("exit %d after cancel, want 0", code)
	}
}

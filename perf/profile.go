package perf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// saveProfiles saves a heap profile of each Wingman agent of the run into dir at the end of the
// scenario (the CPU profile of an agent child covers its whole run: see podSpec.cpuProf).
func saveProfiles(ctx context.Context, e *env, dir, name string, run int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range e.podList() {
		if p.DebugAddr == "" {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-run%d-%s.heap.pprof", name, run, p.ID))
		if err := fetch(ctx, "http://"+p.DebugAddr+"/debug/pprof/heap", path); err != nil {
			return err
		}
	}
	return nil
}

// fetch GETs url into path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	return f.Close()
}

// binaryCPUProfileSeconds is the length of the CPU profile taken from the real binary, from the
// moment its status port answers (it cannot be told to stop at the scenario's end).
const binaryCPUProfileSeconds = 8

// fetchWhenUp retries fetch while the server does not accept connections yet.
func fetchWhenUp(ctx context.Context, url, path string) error {
	for {
		err := fetch(ctx, url, path)
		if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "connection refused") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

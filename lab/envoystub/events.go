package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// event is one JSON line of the stand-in's report.
type event struct {
	ID      string `json:"id"`
	Ev      string `json:"ev"` // start, push, nack, sds, ready, error, exit
	Api     string `json:"api,omitempty"`
	Type    string `json:"type,omitempty"`
	Version string `json:"version,omitempty"`
	Name    string `json:"name,omitempty"`
	Bytes   int    `json:"bytes,omitempty"`
	N       int    `json:"n,omitempty"`
	Err     string `json:"err,omitempty"`
	T       int64  `json:"t"`            // Unix nanoseconds
	T0      int64  `json:"t0,omitempty"` // on "start": when this process's main package was initialised
	// On "start": on-CPU nanoseconds of the agent (PERF_AGENT_PID or the parent) and of this
	// process at T0 (-1: unreadable).
	AgentCPU int64 `json:"agent_cpu,omitempty"`
	CPU      int64 `json:"cpu,omitempty"`
}

// events writes JSON lines. Guarded by mu.
type events struct {
	id  string // set once before the first emit
	mu  sync.Mutex
	w   *bufio.Writer
	c   io.Closer
	enc *json.Encoder
}

func openEvents(spec string) (*events, error) {
	var w io.Writer = os.Stdout
	var c io.Closer = io.NopCloser(nil)
	switch {
	case spec == "":
	case strings.HasPrefix(spec, "unix:"):
		conn, err := net.Dial("unix", strings.TrimPrefix(spec, "unix:"))
		if err != nil {
			return nil, fmt.Errorf("PERF_EVENTS %s: %w", spec, err)
		}
		w, c = conn, conn
	default:
		f, err := os.OpenFile(spec, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("PERF_EVENTS %s: %w", spec, err)
		}
		w, c = f, f
	}
	bw := bufio.NewWriter(w)
	return &events{w: bw, c: c, enc: json.NewEncoder(bw)}, nil
}

func (e *events) emit(ev event) {
	ev.ID = e.id
	if ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
	_ = e.w.Flush()
}

func (e *events) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.w.Flush()
	_ = e.c.Close()
}

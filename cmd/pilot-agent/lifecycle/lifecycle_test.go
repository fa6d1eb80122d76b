package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// trace records events in order.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, s)
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events)
}

// server is a service that runs until cancelled and records its start and stop.
func server(tr *trace, name string, keep bool, started chan<- string) Service {
	return Service{Name: name, KeepDuringDrain: keep,
		Start: func(context.Context) error { tr.add("start " + name); return nil },
		Run: func(ctx context.Context) error {
			if started != nil {
				started <- name
			}
			<-ctx.Done()
			tr.add("stop " + name)
			return ctx.Err()
		}}
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestStartOrderAndDrainOrder(t *testing.T) {
	tr := &trace{}
	started := make(chan string, 8)
	envoyStop := make(chan struct{})
	envoyDraining := make(chan struct{})
	envoy := Service{Name: "envoy", Run: func(ctx context.Context) error {
		started <- "envoy"
		<-ctx.Done()
		tr.add("envoy draining")
		close(envoyDraining)
		<-envoyStop // still draining: the kept services must still run
		tr.add("stop envoy")
		return nil
	}}
	statusStopped := make(chan struct{})
	status := server(tr, "status", false, started)
	statusRun := status.Run
	status.Run = func(ctx context.Context) error {
		defer close(statusStopped)
		return statusRun(ctx)
	}
	services := []Service{server(tr, "dns", true, started), server(tr, "sds", true, started),
		server(tr, "xds", true, started), {Name: "grpc-bootstrap", Start: func(context.Context) error {
			tr.add("start grpc-bootstrap")
			return nil
		}}, status, envoy}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, services) }()
	for range 5 {
		<-started
	}
	cancel()
	for _, ch := range []chan struct{}{envoyDraining, statusStopped} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("shutdown did not reach envoy and status: %v", tr.get())
		}
	}
	for _, e := range tr.get() {
		if e == "stop dns" || e == "stop sds" || e == "stop xds" {
			t.Fatalf("%s before envoy was gone: %v", e, tr.get())
		}
	}
	close(envoyStop)
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
	ev := tr.get()
	want := []string{"start dns", "start sds", "start xds", "start grpc-bootstrap", "start status"}
	if !slices.Equal(ev[:5], want) {
		t.Errorf("start order %v, want %v", ev[:5], want)
	}
	if i, j := slices.Index(ev, "stop envoy"), slices.Index(ev, "stop xds"); i < 0 || j < i {
		t.Errorf("xds stopped before envoy: %v", ev)
	}
}

func TestFirstFailureCancelsTheRest(t *testing.T) {
	tr := &trace{}
	started := make(chan string, 8)
	boom := errors.New("boom")
	crash := make(chan struct{})
	services := []Service{server(tr, "dns", true, started), {Name: "envoy", Run: func(ctx context.Context) error {
		<-crash
		return boom
	}}, server(tr, "status", false, started)}
	done := make(chan error, 1)
	go func() { done <- Run(t.Context(), nil, services) }()
	<-started
	<-started
	close(crash)
	err := waitErr(t, done)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "envoy") {
		t.Fatalf("Run = %v, want envoy's error", err)
	}
	if ev := tr.get(); !slices.Contains(ev, "stop dns") || !slices.Contains(ev, "stop status") {
		t.Errorf("not everything stopped: %v", ev)
	}
}

func TestStartFailureStopsStartedAndSkipsTheRest(t *testing.T) {
	tr := &trace{}
	started := make(chan string, 8)
	services := []Service{server(tr, "dns", true, started),
		{Name: "certs", Start: func(context.Context) error { return errors.New("no root") }},
		server(tr, "envoy", false, started)}
	err := Run(t.Context(), nil, services)
	if err == nil || !strings.Contains(err.Error(), "starting certs: no root") {
		t.Fatalf("Run = %v", err)
	}
	if ev := tr.get(); slices.Contains(ev, "start envoy") || !slices.Contains(ev, "stop dns") {
		t.Errorf("events %v", ev)
	}
}

func TestShutdownWithoutEnvoyStopsKeptServices(t *testing.T) {
	tr := &trace{}
	started := make(chan string, 8)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, []Service{server(tr, "dns", true, started)}) }()
	<-started
	cancel()
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestCleanEarlyExitIsNotAnError(t *testing.T) {
	tr := &trace{}
	started := make(chan string, 8)
	services := []Service{server(tr, "xds", true, started), {Name: "envoy", Run: func(context.Context) error { return nil }}}
	if err := Run(t.Context(), nil, services); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tr.get(), "stop xds") {
		t.Error("xds not stopped")
	}
}

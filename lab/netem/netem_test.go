package netem

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// mustPair makes a Pair, or skips when the machine cannot (not root) and the run is not one
// that must cover namespaces: in CI or as root a missing piece fails (capture's policy).
func mustPair(t *testing.T) *Pair {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" || os.Geteuid() == 0 {
			t.Fatalf("netem cannot run: %v (it must run in CI and as root)", err)
		}
		t.Skipf("netem needs network namespaces and TUN: %v", err)
	}
	p, err := New("wmn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// echo serves one connection in C, echoing what it reads.
func echo(t *testing.T, p *Pair) net.Listener {
	t.Helper()
	l, err := Listen(p.C, "tcp", AddrC+":0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l
}

func TestDelayLossReorder(t *testing.T) {
	p := mustPair(t)
	l := echo(t, p)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	since := time.Now()
	c, err := Dialer(p.A)(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := p.WaitSYN(ctx, since); err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	p.Set(Params{Delay: delay, Jitter: 10 * time.Millisecond, Loss: 0.05})
	// 256 KiB both ways: enough segments in flight for jitter to reorder some and loss to drop
	// some; TCP must still deliver every byte in order.
	msg := make([]byte, 256<<10)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	go func() { _, _ = c.Write(msg) }()
	got := make([]byte, len(msg))
	t0 := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(25 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo through the impaired link: %v (A→C %v; C→A %v)", err, p.AC.Stats(), p.CA.Stats())
	}
	if string(got) != string(msg) {
		t.Fatal("echo differs from what was sent")
	}
	ac, ca := p.AC.Stats(), p.CA.Stats()
	t.Logf("256 KiB echoed in %v; A→C %v; C→A %v", time.Since(t0), ac, ca)
	if time.Since(t0) < 2*(delay-10*time.Millisecond) {
		t.Errorf("a round trip took %v, less than the least delay both ways", time.Since(t0))
	}
	if ac.Lost+ca.Lost == 0 || ac.Reordered+ca.Reordered == 0 {
		t.Errorf("5%% loss and 10ms jitter neither dropped nor reordered a packet: A→C %v; C→A %v", ac, ca)
	}
}

func TestBlackhole(t *testing.T) {
	p := mustPair(t)
	l := echo(t, p)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := Dialer(p.A)(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Set(Params{Blackhole: true})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes through a blackhole", n)
	}
	// A new connection attempt is seen although it is dropped.
	since := time.Now()
	dialed := make(chan struct{})
	defer func() { <-dialed }()
	go func() {
		defer close(dialed)
		c2, err := Dialer(p.A)(ctx, "tcp", l.Addr().String())
		if err == nil {
			c2.Close()
		}
	}()
	if _, err := p.WaitSYN(ctx, since); err != nil {
		t.Fatal(err)
	}
	p.Set(Params{})
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Fatalf("after the blackhole: %q, %v", b, err)
	}
	if s := p.AC.Stats(); s.Blackholed == 0 {
		t.Errorf("nothing blackholed: %v", s)
	}
}

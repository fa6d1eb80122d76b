package netem

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Addresses of the two ends of a Pair: A (the pod: agent and Envoy) and C (the control plane).
const (
	AddrA = "10.250.0.1"
	AddrC = "10.250.0.2"
	// Dev is the name of the TUN device in each namespace.
	Dev = "wmt0"
	// queueLimit is the most packets a direction holds (netem's default limit is 1000); more
	// are dropped and counted as Overflow.
	queueLimit = 4096
)

// Params are one direction's impairments. The zero value passes packets straight through.
type Params struct {
	Delay, Jitter time.Duration // each packet waits Delay ± a uniform Jitter
	Loss          float64       // probability in [0, 1] that a packet is dropped
	Blackhole     bool          // drop every packet, the queued ones included (a half-open path)
}

// Stats counts one direction's packets.
type Stats struct {
	In, Out    uint64 // read from the sending namespace, written into the receiving one
	Lost       uint64 // dropped by Loss
	Blackholed uint64 // dropped by Blackhole
	Overflow   uint64 // dropped because queueLimit packets were waiting
	Reordered  uint64 // written after a packet that arrived later than it
}

func (s Stats) String() string {
	return fmt.Sprintf("in %d out %d lost %d blackholed %d overflow %d reordered %d",
		s.In, s.Out, s.Lost, s.Blackholed, s.Overflow, s.Reordered)
}

// Available reports why namespaces and TUN links cannot be made here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("not root (network namespaces and TUN devices need CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("no ip command (Debian package iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("no TUN device: %w", err)
	}
	return nil
}

// Do runs fn on an OS thread that has entered the network namespace ns (a name under
// /run/netns). Sockets made by fn stay in ns for their whole life, whatever thread later uses
// them. The thread is never returned to the Go scheduler: the goroutine exits locked, so the
// runtime ends the thread instead of reusing it in the wrong namespace.
func Do(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("netem: open namespace %s: %w", ns, err)
			}
			defer unix.Close(fd)
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("netem: enter namespace %s: %w", ns, err)
			}
			return fn()
		}()
	}()
	return <-errc
}

// Listen listens in namespace ns.
func Listen(ns, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(ns, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Dialer returns a DialContext that dials from namespace ns (for an http.Transport).
func Dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := Do(ns, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Pair is two network namespaces, A and C, joined by a TUN device in each and two pipes in
// this process, one per direction. Its methods are safe for concurrent use.
type Pair struct {
	A, C   string   // namespace names; immutable
	fa, fc *os.File // the TUN devices; immutable, closed by Close
	AC, CA *Pipe    // A→C and C→A
	done   chan struct{}
	wg     sync.WaitGroup // the four pump goroutines
	once   sync.Once

	synMu   sync.Mutex // guards syns and synWake
	syns    []time.Time
	synWake chan struct{} // closed and replaced on every SYN
}

var seq atomic.Int32

// New makes two namespaces named after prefix (which should be short: interface and namespace
// names are limited), links them and starts forwarding with no impairment.
func New(prefix string) (*Pair, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	n := seq.Add(1)
	p := &Pair{A: fmt.Sprintf("%s%d-%da", prefix, os.Getpid(), n), C: fmt.Sprintf("%s%d-%dc", prefix, os.Getpid(), n),
		done: make(chan struct{}), synWake: make(chan struct{})}
	for _, ns := range []string{p.A, p.C} {
		if err := ip("netns", "add", ns); err != nil {
			p.deleteNS()
			return nil, err
		}
	}
	var err error
	if p.fa, err = openTUN(p.A); err == nil {
		p.fc, err = openTUN(p.C)
	}
	if err == nil {
		err = p.configure()
	}
	if err != nil {
		p.closeFiles()
		p.deleteNS()
		return nil, err
	}
	p.AC = newPipe(p.fa, p.fc, p.done, p.sawSYN)
	p.CA = newPipe(p.fc, p.fa, p.done, nil)
	for _, pp := range []*Pipe{p.AC, p.CA} {
		p.wg.Go(pp.read)
		p.wg.Go(pp.write)
	}
	return p, nil
}

func (p *Pair) configure() error {
	for _, c := range [][]string{
		{"-n", p.A, "link", "set", "lo", "up"},
		{"-n", p.C, "link", "set", "lo", "up"},
		{"-n", p.A, "addr", "add", AddrA + "/32", "peer", AddrC + "/32", "dev", Dev},
		{"-n", p.C, "addr", "add", AddrC + "/32", "peer", AddrA + "/32", "dev", Dev},
		{"-n", p.A, "link", "set", Dev, "up"},
		{"-n", p.C, "link", "set", Dev, "up"},
	} {
		if err := ip(c...); err != nil {
			return err
		}
	}
	return nil
}

// Set sets the impairments of both directions.
func (p *Pair) Set(ps Params) {
	p.AC.Set(ps)
	p.CA.Set(ps)
}

// WaitSYN returns the time of the first TCP SYN (a connection attempt, SYN without ACK) sent
// from A towards C at or after since, waiting for one until ctx ends. SYNs are seen before any
// impairment, so attempts into a blackhole count.
func (p *Pair) WaitSYN(ctx context.Context, since time.Time) (time.Time, error) {
	for {
		p.synMu.Lock()
		for _, t := range p.syns {
			if !t.Before(since) {
				p.synMu.Unlock()
				return t, nil
			}
		}
		wake := p.synWake
		p.synMu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("netem: no connection attempt from %s since %s: %w", p.A, since.Format(time.TimeOnly), context.Cause(ctx))
		}
	}
}

func (p *Pair) sawSYN(pkt []byte) {
	if !isSYN(pkt) {
		return
	}
	p.synMu.Lock()
	p.syns = append(p.syns, time.Now())
	close(p.synWake)
	p.synWake = make(chan struct{})
	p.synMu.Unlock()
}

// isSYN reports whether pkt is an IPv4 TCP segment with SYN set and ACK clear.
func isSYN(pkt []byte) bool {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != unix.IPPROTO_TCP {
		return false
	}
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) < ihl+14 {
		return false
	}
	flags := pkt[ihl+13]
	return flags&0x02 != 0 && flags&0x10 == 0
}

// Close stops forwarding, closes the devices and deletes both namespaces (which ends every
// socket left in them).
func (p *Pair) Close() {
	p.once.Do(func() {
		close(p.done)
		p.closeFiles()
		p.wg.Wait()
		p.deleteNS()
	})
}

func (p *Pair) closeFiles() {
	for _, f := range []*os.File{p.fa, p.fc} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *Pair) deleteNS() {
	for _, ns := range []string{p.A, p.C} {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("netem: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// openTUN makes the TUN device Dev in namespace ns and returns it, non-blocking, so that
// closing it ends a pending Read.
func openTUN(ns string) (*os.File, error) {
	var f *os.File
	err := Do(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("netem: open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(Dev)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("netem: %w", err)
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netem: TUNSETIFF %s in %s: %w", Dev, ns, err)
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netem: %w", err)
		}
		f = os.NewFile(uintptr(fd), ns+"/"+Dev)
		return nil
	})
	return f, err
}

// Pipe moves packets one way. Params and the queue are guarded by mu; the counters are atomic.
type Pipe struct {
	in, out *os.File
	done    <-chan struct{}
	observe func([]byte)  // called with every packet read, before any impairment; may be nil
	kick    chan struct{} // wakes the writer (capacity 1)

	mu      sync.Mutex
	p       Params
	q       queue
	arrived uint64 // arrival sequence
	lastOut uint64 // highest sequence written

	nIn, nOut, lost, blackholed, overflow, reordered atomic.Uint64
}

func newPipe(in, out *os.File, done <-chan struct{}, observe func([]byte)) *Pipe {
	return &Pipe{in: in, out: out, done: done, observe: observe, kick: make(chan struct{}, 1)}
}

// Set replaces the direction's impairments; packets already queued keep their due time.
func (pp *Pipe) Set(p Params) {
	pp.mu.Lock()
	pp.p = p
	pp.mu.Unlock()
	select {
	case pp.kick <- struct{}{}:
	default:
	}
}

// Stats is a snapshot of the counters.
func (pp *Pipe) Stats() Stats {
	return Stats{In: pp.nIn.Load(), Out: pp.nOut.Load(), Lost: pp.lost.Load(), Blackholed: pp.blackholed.Load(),
		Overflow: pp.overflow.Load(), Reordered: pp.reordered.Load()}
}

func (pp *Pipe) read() {
	buf := make([]byte, 65536)
	for {
		n, err := pp.in.Read(buf)
		if err != nil {
			return // closed by Pair.Close
		}
		pp.nIn.Add(1)
		pkt := buf[:n]
		if pp.observe != nil {
			pp.observe(pkt)
		}
		pp.mu.Lock()
		p := pp.p
		switch {
		case p.Blackhole:
			pp.blackholed.Add(1)
		case p.Loss > 0 && rand.Float64() < p.Loss:
			pp.lost.Add(1)
		case len(pp.q) >= queueLimit:
			pp.overflow.Add(1)
		default:
			d := p.Delay
			if p.Jitter > 0 {
				d += time.Duration(rand.Int64N(int64(2*p.Jitter)+1)) - p.Jitter
			}
			pp.arrived++
			heap.Push(&pp.q, packet{due: time.Now().Add(max(d, 0)), seq: pp.arrived, b: append([]byte(nil), pkt...)})
		}
		pp.mu.Unlock()
		select {
		case pp.kick <- struct{}{}:
		default:
		}
	}
}

func (pp *Pipe) write() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		pp.mu.Lock()
		var wait time.Duration = -1
		var pkt []byte
		if len(pp.q) > 0 {
			if d := time.Until(pp.q[0].due); d > 0 {
				wait = d
			} else {
				x := heap.Pop(&pp.q).(packet)
				if pp.p.Blackhole {
					pp.blackholed.Add(1)
				} else {
					pkt = x.b
					if x.seq < pp.lastOut {
						pp.reordered.Add(1)
					} else {
						pp.lastOut = x.seq
					}
				}
			}
		}
		empty := len(pp.q) == 0
		pp.mu.Unlock()
		if pkt != nil {
			if _, err := pp.out.Write(pkt); err == nil {
				pp.nOut.Add(1)
			}
			continue
		}
		if !empty && wait < 0 {
			continue // a blackholed packet was dropped: look at the next
		}
		var tc <-chan time.Time
		if wait >= 0 {
			t.Reset(wait)
			tc = t.C
		}
		select {
		case <-pp.done:
			return
		case <-pp.kick:
		case <-tc:
		}
	}
}

type packet struct {
	due time.Time
	seq uint64
	b   []byte
}

// queue is a min-heap of packets by due time, then arrival.
type queue []packet

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].due.Equal(q[j].due) {
		return q[i].seq < q[j].seq
	}
	return q[i].due.Before(q[j].due)
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(packet)) }
func (q *queue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

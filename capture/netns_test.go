package capture

// The traffic tests run in network namespaces made for each test: "pod" (where the capture is
// programmed, address 10.99.0.2 / fd00:99::2) and "peer" (the rest of the world, 10.99.0.1 and
// 10.99.0.3 / fd00:99::1 and fd00:99::3) joined by a veth pair. All traffic stays on that
// pair and on the namespaces' loopback. Listeners, dialers and the programmer itself are child
// processes: this test binary re-executed under `ip netns exec`, dialers with the uid under
// test (SysProcAttr.Credential).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// helperBin is this test binary, copied where unprivileged uids may execute it.
var helperBin string

func TestMain(m *testing.M) {
	if mode := os.Getenv("WM_HELPER"); mode != "" {
		os.Exit(helperMain(mode))
	}
	dir, err := os.MkdirTemp("", "wm-capture-")
	if err == nil {
		_ = os.Chmod(dir, 0o755)
		if b, err := os.ReadFile(os.Args[0]); err == nil && os.WriteFile(filepath.Join(dir, "capture.test"), b, 0o755) == nil {
			helperBin = filepath.Join(dir, "capture.test")
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// mustNetns fails the test, rather than skipping it, when namespaces cannot be made and the
// run is one that must cover them: in CI or as root. Elsewhere it skips, saying why.
func mustNetns(t *testing.T) {
	t.Helper()
	var why string
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (iproute2)"
	} else if _, err := exec.LookPath("iptables-restore"); err != nil {
		why = "no iptables (Debian package iptables)"
	} else if helperBin == "" {
		why = "cannot copy the test binary for the helper processes"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" || os.Geteuid() == 0 {
		t.Fatalf("network namespace tests cannot run: %s (they must run in CI and as root)", why)
	}
	t.Skipf("network namespace tests need root and iptables: %s", why)
}

var labSeq atomic.Int32

// lab is a pod and a peer namespace joined by veth.
type lab struct {
	t         *testing.T
	pod, peer string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	mustNetns(t)
	n := labSeq.Add(1)
	l := &lab{t: t, pod: fmt.Sprintf("wmpod%d-%d", os.Getpid(), n), peer: fmt.Sprintf("wmpeer%d-%d", os.Getpid(), n)}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", l.pod).Run()
		_ = exec.Command("ip", "netns", "del", l.peer).Run()
	})
	l.ip("netns", "add", l.pod)
	l.ip("netns", "add", l.peer)
	l.ip("link", "add", "wm0", "netns", l.pod, "type", "veth", "peer", "name", "wm1", "netns", l.peer)
	for _, c := range [][]string{
		{"-n", l.pod, "link", "set", "lo", "up"},
		{"-n", l.peer, "link", "set", "lo", "up"},
		{"-n", l.pod, "addr", "add", "10.99.0.2/24", "dev", "wm0"},
		{"-n", l.peer, "addr", "add", "10.99.0.1/24", "dev", "wm1"},
		{"-n", l.peer, "addr", "add", "10.99.0.3/24", "dev", "wm1"},
		{"-n", l.pod, "addr", "add", "fd00:99::2/64", "dev", "wm0", "nodad"},
		{"-n", l.peer, "addr", "add", "fd00:99::1/64", "dev", "wm1", "nodad"},
		{"-n", l.peer, "addr", "add", "fd00:99::3/64", "dev", "wm1", "nodad"},
		{"-n", l.pod, "link", "set", "wm0", "up"},
		{"-n", l.peer, "link", "set", "wm1", "up"},
	} {
		l.ip(c...)
	}
	return l
}

func (l *lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// run runs a command in a namespace and returns its combined output.
func (l *lab) run(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	return string(out), err
}

// helper starts this binary in a namespace in one of the helper modes.
func (l *lab) helper(ns, mode string, env ...string) *exec.Cmd {
	c := exec.Command("ip", "netns", "exec", ns, helperBin)
	// GORACE: a -race helper would otherwise sleep a second before every exit.
	c.Env = append([]string{"WM_HELPER=" + mode, "PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}, env...)
	return c
}

// apply runs capture.Run with opts inside the pod namespace; it returns the error text.
func (l *lab) apply(opts Options) error {
	l.t.Helper()
	b, err := jsonOptions(opts)
	if err != nil {
		l.t.Fatal(err)
	}
	c := l.helper(l.pod, "apply", "WM_OPTS="+b)
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func jsonOptions(o Options) (string, error) {
	b, err := json.Marshal(o)
	return string(b), err
}

// listen starts listeners in a namespace: specs are proto:port:tag[:transparent]. Each
// accepted TCP connection is answered with "tag localport origdst"; each UDP datagram with
// "tag localport". They stop with the test.
func (l *lab) listen(ns string, uid int, specs ...string) {
	l.t.Helper()
	c := l.helper(ns, "listen", "WM_LISTEN="+strings.Join(specs, ","), "WM_UID="+strconv.Itoa(uid))
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		stdin.Close()
		_ = c.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		l.t.Fatalf("listeners in %s (%v) did not start: %q %v", ns, specs, line, err)
	}
}

// dial connects from the pod namespace as uid (proto tcp or udp) and returns the answer (or
// "error: ...").
func (l *lab) dial(ns string, uid int, proto, addr string) string {
	l.t.Helper()
	c := l.helper(ns, "dial", "WM_UID="+strconv.Itoa(uid), "WM_PROTO="+proto, "WM_ADDR="+addr)
	out, err := c.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "error: " + string(ee.Stderr)
		}
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

func helperMain(mode string) int {
	if v := os.Getenv("WM_UID"); v != "" {
		if uid, _ := strconv.Atoi(v); uid != os.Getuid() {
			return reexecAs(uid)
		}
	}
	switch mode {
	case "apply":
		var o Options
		if err := json.Unmarshal([]byte(os.Getenv("WM_OPTS")), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		o.Runner, o.Out, o.Log = ExecRunner{}, os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, nil))
		if err := Run(context.Background(), o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "listen":
		return helperListen(os.Getenv("WM_LISTEN"))
	case "dial":
		return helperDial()
	}
	return 2
}

func helperListen(specs string) int {
	for _, spec := range strings.Split(specs, ",") {
		f := strings.Split(spec, ":")
		proto, port, tag := f[0], f[1], f[2]
		lc := net.ListenConfig{}
		if len(f) > 3 && f[3] == "transparent" {
			lc.Control = func(_, _ string, c syscall.RawConn) error {
				var serr error
				err := c.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
					if serr == nil {
						serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
					}
				})
				if err != nil {
					return err
				}
				return serr
			}
		}
		if proto == "udp" {
			// One socket per local address: a wildcard UDP socket answers from the address
			// routing picks, which is not the one asked (nor the one conntrack expects).
			addrs, err := net.InterfaceAddrs()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			for _, a := range addrs {
				ip, _ := netip.AddrFromSlice(a.(*net.IPNet).IP)
				ip = ip.Unmap()
				if ip.IsLinkLocalUnicast() {
					continue
				}
				pc, err := lc.ListenPacket(context.Background(), "udp", netip.AddrPortFrom(ip, mustPort(port)).String())
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
				go func() {
					buf := make([]byte, 512)
					for {
						_, from, err := pc.ReadFrom(buf)
						if err != nil {
							return
						}
						_, _ = pc.WriteTo([]byte(tag+" "+port), from)
					}
				}()
			}
			continue
		}
		ln, err := lc.Listen(context.Background(), "tcp", "[::]:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				orig := c.LocalAddr().(*net.TCPAddr).AddrPort()
				if a, p, err := OriginalDst(c); err == nil {
					orig = netip.AddrPortFrom(a.Unmap(), p)
				} else {
					orig = netip.AddrPortFrom(orig.Addr().Unmap(), orig.Port())
				}
				fmt.Fprintf(c, "%s %s %s\n", tag, port, orig)
				c.Close()
			}
		}()
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
	return 0
}

// reexecAs runs this helper again as uid (its gid the same number), sharing stdio.
func reexecAs(uid int) int {
	c := exec.Command(os.Args[0])
	c.Env = os.Environ()
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := c.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func helperDial() int {
	proto, addr := os.Getenv("WM_PROTO"), os.Getenv("WM_ADDR")
	c, err := net.DialTimeout(proto, addr, 3*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if proto == "udp" {
		if _, err := c.Write([]byte("q")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(strings.TrimSpace(string(buf[:n])))
	return 0
}

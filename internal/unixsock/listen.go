// Package unixsock publishes Unix-domain listening sockets atomically: the socket file
// appears at its path only once it accepts connections, with its final mode.
//
// net.Listen("unix", path) binds the path before it listens, and a client that sees the
// file in between (Envoy, a probe, a test polling for the file) is refused. Binding a
// private name in the same directory and renaming it onto the path closes that window.
package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

var seq atomic.Uint64

// Modes Istio gives a socket the agent serves, and its directory when it has to make it: its one
// helper, pkg/uds/listener.go NewListener (1.30.3), used for both the XDS socket
// (pkg/istio-agent/xds_proxy.go) and the SDS socket (security/pkg/nodeagent/sds/server.go).
// Envoy may run as another uid, so the socket is open to every local user.
const (
	DirMode    os.FileMode = 0o750
	SocketMode os.FileMode = 0o666
)

// Listen listens on a fresh socket with SocketMode and puts it at path in place of any stale
// socket there, making the directory (DirMode) when it is missing. The returned listener
// removes path when closed, unless another socket has replaced it by then.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return nil, fmt.Errorf("socket directory for %s: %w", path, err)
	}
	return listenMode(path, SocketMode)
}

// listenMode publishes the socket at path with mode; the directory must exist.
func listenMode(path string, mode os.FileMode) (net.Listener, error) {
	// The private name is short: a Unix socket path is limited to 107 bytes.
	tmp := filepath.Join(filepath.Dir(path), ".s"+strconv.Itoa(os.Getpid())+"."+strconv.FormatUint(seq.Add(1), 10))
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove %s: %w", tmp, err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		_ = l.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(fmt.Errorf("chmod socket %s: %w", path, err))
	}
	// rename replaces a stale socket at path in one step.
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("publish socket %s: %w", path, err))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fail(fmt.Errorf("publish socket %s: %w", path, err))
	}
	return &listener{UnixListener: l, path: path, file: fi}, nil
}

type listener struct {
	*net.UnixListener
	path string
	file os.FileInfo // the published socket, to tell it from a successor at the same path
	once sync.Once
}

// Addr reports the published path, not the private name the socket was bound to.
func (l *listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops accepting and removes the socket file.
func (l *listener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, err := os.Stat(l.path); err == nil && os.SameFile(fi, l.file) {
			_ = os.Remove(l.path)
		}
	})
	return err
}

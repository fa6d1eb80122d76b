// Command envoyproc is a stand-in for Envoy used by the supervisor and CLI tests. It records its
// arguments, serves a small admin API (/stats, /drain_listeners, /quitquitquit) and, as told by
// STANDIN_* environment variables, crashes, hangs, drains slowly or leaves an orphan behind. It
// reports what happens to it by POSTing one-line events to STANDIN_NOTIFY when that is set.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if f := os.Getenv("STANDIN_STARTED_FILE"); f != "" { // first thing: when the exec landed
		_ = os.WriteFile(f, []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
	}
	switch os.Getenv("STANDIN_ROLE") {
	case "intermediate": // start the grandchild and leave it orphaned
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "STANDIN_ROLE=grandchild")
		if err := c.Start(); err != nil {
			fail("starting grandchild: %v", err)
		}
		os.Exit(0)
	case "grandchild": // say who we are, then exit and wait to be reaped by whoever adopted us
		notify("orphan " + strconv.Itoa(os.Getpid()))
		os.Exit(0)
	}

	if f := os.Getenv("STANDIN_ARGS_FILE"); f != "" {
		rec := map[string]any{"args": os.Args[1:], "uid": os.Getuid(), "gid": os.Getgid(),
			"probe": os.Getenv("STANDIN_ENV_PROBE")}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			fail("writing args: %v", err)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort())))
	if err != nil {
		fail("admin listen: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", stats)
	mux.HandleFunc("/drain_listeners", func(w http.ResponseWriter, r *http.Request) {
		notify("drain " + r.Method + " " + r.URL.RawQuery)
		if ms := os.Getenv("STANDIN_DRAIN_EXIT_MS"); ms != "" && !strings.Contains(r.URL.RawQuery, "skip_exit") {
			d, _ := strconv.Atoi(ms)
			time.AfterFunc(time.Duration(d)*time.Millisecond, func() { os.Exit(0) })
		}
		fmt.Fprintln(w, "OK")
	})
	mux.HandleFunc("/quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "OK")
		go os.Exit(0)
	})
	go func() { _ = http.Serve(ln, mux) }()

	if os.Getenv("STANDIN_ORPHAN") != "" {
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "STANDIN_ROLE=intermediate")
		if err := c.Run(); err != nil {
			fail("intermediate: %v", err)
		}
	}
	notify("started " + strconv.Itoa(os.Getpid()))

	if code := os.Getenv("STANDIN_EXIT_CODE"); code != "" {
		n, _ := strconv.Atoi(code)
		ms, _ := strconv.Atoi(os.Getenv("STANDIN_EXIT_AFTER_MS"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		os.Exit(n)
	}
	for s := range sigs {
		notify("signal " + s.String())
		if os.Getenv("STANDIN_IGNORE_TERM") == "" {
			os.Exit(0)
		}
	}
}

// adminPort is STANDIN_ADMIN_PORT, else the admin port of the bootstrap given with -c.
func adminPort() int {
	if p := os.Getenv("STANDIN_ADMIN_PORT"); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	for i, a := range os.Args {
		if a == "-c" && i+1 < len(os.Args) {
			b, err := os.ReadFile(os.Args[i+1])
			if err != nil {
				fail("reading bootstrap: %v", err)
			}
			var bs struct {
				Admin struct {
					Address struct {
						SocketAddress struct {
							PortValue int `json:"port_value"`
						} `json:"socket_address"`
					} `json:"address"`
				} `json:"admin"`
			}
			if err := json.Unmarshal(b, &bs); err != nil {
				fail("parsing bootstrap: %v", err)
			}
			return bs.Admin.Address.SocketAddress.PortValue
		}
	}
	return 0
}

func stats(w http.ResponseWriter, r *http.Request) {
	notify("stats " + r.URL.RawQuery)
	switch os.Getenv("STANDIN_STATS") {
	case "error":
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case "empty":
		return
	}
	n := "0"
	if f := os.Getenv("STANDIN_CONNS_FILE"); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			n = strings.TrimSpace(string(b))
		}
	}
	// Lines the agent must ignore, then the one it counts.
	fmt.Fprintf(w, "listener.admin.downstream_cx_active: 7\n")
	fmt.Fprintf(w, "listener.0.0.0.0_15021.downstream_cx_active: 5\n")
	fmt.Fprintf(w, "listener.0.0.0.0_15006.worker_0.downstream_cx_active: 9\n")
	fmt.Fprintf(w, "http.inbound_0.0.0.0_8080.downstream_cx_active: 4\n")
	fmt.Fprintf(w, "listener.0.0.0.0_15006.downstream_cx_active: %s\n", n)
}

func notify(event string) {
	u := os.Getenv("STANDIN_NOTIFY")
	if u == "" {
		return
	}
	resp, err := http.Post(u, "text/plain", strings.NewReader(event))
	if err == nil {
		resp.Body.Close()
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "standin: "+format+"\n", args...)
	os.Exit(99)
}

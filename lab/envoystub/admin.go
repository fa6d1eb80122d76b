package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
)

var errQuit = errors.New("quit requested on the admin API")

// state is what the admin API reports. All fields atomic.
type state struct {
	cdsOK, cdsRejected, ldsOK, ldsRejected atomic.Uint64
	certs                                  atomic.Uint64
}

// startAdmin serves the admin endpoints the agent reads: /stats (readiness and drain stats),
// /ready, /server_info, /quitquitquit, /drain_listeners and /healthcheck/fail.
func startAdmin(port int, st *state, quit func()) (*http.Server, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("admin listen on port %d: %w", port, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "cluster_manager.cds.update_rejected: %d\ncluster_manager.cds.update_success: %d\n"+
			"listener_manager.lds.update_rejected: %d\nlistener_manager.lds.update_success: %d\n"+
			"listener_manager.workers_started: 1\nserver.state: 0\n",
			st.cdsRejected.Load(), st.cdsOK.Load(), st.ldsRejected.Load(), st.ldsOK.Load())
	})
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE envoy_server_state gauge\nenvoy_server_state 0\n")
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		if st.cdsOK.Load() == 0 || st.ldsOK.Load() == 0 {
			http.Error(w, "PRE_INITIALIZING", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "LIVE")
	})
	mux.HandleFunc("/server_info", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"state":"LIVE","version":"envoystub"}`)
	})
	mux.HandleFunc("/quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "OK")
		quit()
	})
	for _, p := range []string{"/drain_listeners", "/healthcheck/fail", "/healthcheck/ok"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "OK") })
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}

package status

import (
	"net/http"
	"net/http/pprof"
)

// lifecyclePost admits a lifecycle request: POST, from localhost, with a Lifecycle to act on.
// Otherwise it answers the error and returns false.
func (s *Server) lifecyclePost(w http.ResponseWriter, r *http.Request, what string) bool {
	switch {
	case r.Method != http.MethodPost:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case !isLocal(r.RemoteAddr):
		http.Error(w, "only requests from localhost are allowed", http.StatusForbidden)
	case s.cfg.Lifecycle == nil:
		http.Error(w, what+" is not supported", http.StatusServiceUnavailable)
	default:
		return true
	}
	return false
}

// handleQuit is POST /quitquitquit from localhost: answer, then start an immediate exit.
func (s *Server) handleQuit(w http.ResponseWriter, r *http.Request) {
	if !s.lifecyclePost(w, r, "quit") {
		return
	}
	w.Write([]byte("OK"))
	if f, ok := w.(http.Flusher); ok {
		f.Flush() // the answer is out before the shutdown closes this connection
	}
	s.cfg.Logger.Info("quit requested over /quitquitquit", "remote", r.RemoteAddr)
	s.cfg.Lifecycle.Quit()
}

// handleDrain is POST /drain from localhost: Envoy drains its listeners (native-sidecar preStop).
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	if !s.lifecyclePost(w, r, "drain") {
		return
	}
	if err := s.cfg.Lifecycle.Drain(r.Context()); err != nil {
		s.cfg.Logger.Warn("drain over /drain failed", "error", err)
		http.Error(w, "drain failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write([]byte("OK"))
}

// handleNDSZ serves the DNS NameTable as JSON; 404 with {} when there is none.
func (s *Server) handleNDSZ(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	var body []byte
	if s.cfg.NDSZ != nil {
		b, err := s.cfg.NDSZ()
		if err != nil {
			http.Error(w, "reading the DNS name table: "+err.Error(), http.StatusInternalServerError)
			return
		}
		body = b
	}
	if len(body) == 0 {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("{}"))
		return
	}
	w.Write(body)
}

// registerPprof serves net/http/pprof to local callers only.
func registerPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", localOnly(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", localOnly(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", localOnly(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", localOnly(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", localOnly(pprof.Trace))
}

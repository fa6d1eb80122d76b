package status

import (
	"net/http"
	"net/netip"
)

// isLocal reports whether a request's peer (http.Request.RemoteAddr) is a loopback address,
// the only callers allowed to quit, drain, profile or read /debug/ndsz.
func isLocal(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// localOnly wraps h with the loopback check: other callers get 403.
func localOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !isLocal(r.RemoteAddr) {
			http.Error(w, "only requests from localhost are allowed", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// Package istiod is how the agent reaches Istiod, for the xDS upstream (mux) and the CA client
// (certs) alike: address, the plaintext rule, TLS verification against roots re-read when their
// file changes, the server name, the client certificate per handshake, the bearer token read per
// call, and the ClusterID and header metadata sent on every call.
package istiod

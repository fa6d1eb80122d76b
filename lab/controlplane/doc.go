// Package controlplane is the one Istiod stand-in of Wingman's tests, demo and performance
// harness: go-control-plane's real xDS server (state-of-the-world and Delta ADS over one
// LinearCache per type, per partition of clients) and, when given one, the real CA of
// lab/testca, on one TLS port with a bearer-token check, as Istiod serves both on 15012. The
// same caches can also be served in plaintext, as Istiod's 15010 serves xDS.
//
// The serving certificate is signed by a throwaway root of its own (RootPEM) for ServerName,
// "istiod", "localhost" and 127.0.0.1. meshlab, the mux tests and perf all build on it.
package controlplane

// Package certs gives the workload its identity: it mints keys and CSRs, has Istio's CA sign them
// (istio.v1.auth.IstioCertificateService), keeps the certificate fresh with a rotation that never
// leaves Envoy without a valid secret, watches file-mounted certificates, and serves everything to
// Envoy over SDS on a Unix socket.
//
// The Manager owns the secrets; the Server streams them. Both are Run(ctx) services that cmd starts
// at once: the SDS socket serves before any certificate exists (requests wait for it), and the
// first key is generated concurrently with everything else.
package certs

package istiod

import (
	"crypto/tls"
	"net"
	"strings"
	"time"
)

// Config describes one way to Istiod. Each user passes its own: the xDS proxy its discovery
// address and XDS_HEADER_* metadata, the CA client its CA address and CA_HEADER_* metadata.
type Config struct {
	// Address is host:port of the server.
	Address string
	// Plaintext disables TLS: for the xDS upstream when controlPlaneAuthPolicy is NONE, for the
	// CA when its address is on Istiod's plaintext port (see [CAPlaintext]).
	Plaintext bool
	// CompliancePolicy (COMPLIANCE_POLICY, one of CompliancePolicies()) restricts the TLS
	// versions, cipher suites and curves as Istio's agent restricts its own TLS.
	CompliancePolicy string
	// RootCAFile holds the PEM roots that verify Istiod; re-read when it changes. Empty means
	// the system roots.
	RootCAFile string
	// ServerName is the name Istiod's certificate must carry (see [ServerName]).
	ServerName string
	// ClientCertificate, when set, supplies the client certificate at each handshake.
	ClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// TokenFile is read on every call for the `authorization: Bearer` header; a missing file or
	// an empty token sends no header.
	TokenFile string
	// ClusterID, when set, is sent as the ClusterID header on every call.
	ClusterID string
	// Metadata is sent on every call (XDS_HEADER_* for xDS, CA_HEADER_* for the CA).
	Metadata map[string]string
	// KeepaliveTime and KeepaliveTimeout, when KeepaliveTime > 0, set HTTP/2 keepalive pings
	// (also without active streams).
	KeepaliveTime, KeepaliveTimeout time.Duration
}

// IsPlaintext reports whether the connection goes without TLS.
func (c *Config) IsPlaintext() bool { return c.Plaintext }

// CAPlaintext is Istio's rule for the CA client (pkg/istio-agent, createCitadel): an endpoint
// ending in ":15010", Istiod's plaintext port, is dialled without TLS. The xDS upstream has no such
// rule: Istio's agent dials it without TLS only when controlPlaneAuthPolicy is NONE
// (xds_proxy.go, getTLSOptions), whatever the port.
func CAPlaintext(addr string) bool { return strings.HasSuffix(addr, ":15010") }

// ServerName is the TLS server name that verifies Istiod at addr: istiodSAN (ISTIOD_SAN) when
// set, else the address's host, with localhost mapped to istiod.istio-system.svc as Istio's agent
// does for a local port-forward.
func ServerName(addr, istiodSAN string) string {
	if istiodSAN != "" {
		return istiodSAN
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" || strings.HasPrefix(host, "localhost.") {
		return "istiod.istio-system.svc"
	}
	return host
}

// Package dns is the agent's local DNS proxy (Istio's "DNS capture"): it listens on
// 127.0.0.1:15053 (and [::1]:15053 when the node has IPv6 nameservers) over UDP and TCP,
// answers A and AAAA queries for mesh hosts from the NameTable that Istiod pushes over xDS,
// and forwards every other query to the nameservers of resolv.conf.
//
// The lookup table is rebuilt from each NameTable push and swapped atomically; the query path
// takes no lock. Answers for table hits are written straight into a per-worker buffer from
// pre-encoded resource records, so a table hit allocates nothing. Forwarded queries are sent
// as received (the client's bytes) over the client's transport; the reply is validated and
// cut to the client's UDP size when needed. PARITY.md lists where answers differ from
// Istio's agent, each with the RFC that requires it.
package dns

//go:build disable_pgv

package envoyproto

import bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

// PGVRules says whether Envoy's PGV field rules are compiled into this binary.
const PGVRules = false

// fieldRules: the disable_pgv build strips Envoy's generated rules; strict parsing and the
// reference checks still run.
func fieldRules(*bootstrapv3.Bootstrap) []Finding { return nil }

//go:build disable_pgv

package envoyproto

import "google.golang.org/protobuf/proto"

// PGVRules says whether Envoy's PGV field rules are compiled into this binary.
const PGVRules = false

// fieldRules: the disable_pgv build strips Envoy's generated rules; strict parsing and the
// reference checks still run.
func fieldRules(proto.Message) []Finding { return nil }

//go:build !disable_pgv

package envoyproto

import (
	"errors"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/proto"
)

// PGVRules says whether Envoy's PGV field rules are compiled into this binary.
const PGVRules = true

// fieldRules runs Envoy's PGV rules (ValidateAll), one finding per violated rule. The generated
// rules live on go-control-plane's typed messages, so only this build links them: the dynamic
// bootstrap is copied into the typed one through the wire format.
func fieldRules(m proto.Message) []Finding {
	raw, err := proto.Marshal(m)
	if err != nil {
		return []Finding{{Message: "bootstrap: " + err.Error()}}
	}
	b := &bootstrapv3.Bootstrap{}
	if err := proto.Unmarshal(raw, b); err != nil {
		return []Finding{{Message: "bootstrap: " + err.Error()}}
	}
	err = b.ValidateAll()
	if err == nil {
		return nil
	}
	var out []Finding
	var multi interface{ AllErrors() []error }
	if errors.As(err, &multi) {
		for _, e := range multi.AllErrors() {
			out = append(out, pgvFinding(e))
		}
		return out
	}
	return []Finding{pgvFinding(err)}
}

// pgvFinding follows PGV's Cause chain to build a dotted field path.
func pgvFinding(err error) Finding {
	type fielder interface {
		Field() string
		Cause() error
		Reason() string
	}
	path := ""
	reason := err.Error()
	for e := err; e != nil; {
		f, ok := e.(fielder)
		if !ok {
			var m interface{ AllErrors() []error }
			if errors.As(e, &m) && len(m.AllErrors()) > 0 {
				e = m.AllErrors()[0]
				continue
			}
			break
		}
		path = join(path, f.Field())
		reason = f.Reason()
		e = f.Cause()
	}
	return Finding{Path: path, Message: "Envoy field rule: " + reason}
}

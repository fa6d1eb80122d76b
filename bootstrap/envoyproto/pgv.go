//go:build !disable_pgv

package envoyproto

import (
	"errors"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// PGVRules says whether Envoy's PGV field rules are compiled into this binary.
const PGVRules = true

// fieldRules runs Envoy's PGV rules (ValidateAll), one finding per violated rule.
func fieldRules(b *bootstrapv3.Bootstrap) []Finding {
	err := b.ValidateAll()
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

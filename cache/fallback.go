package cache

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wingman-mesh/wingman/fastpath"
)

// The RBAC filters that stand in for a Wasm module that cannot be fetched (Istio:
// pkg/wasm/convert.go allowHTTPTypedConfig and friends). No rules allow everything; an empty
// rule set denies everything. Encoded by hand (four constant messages) rather than linking
// Envoy's RBAC protos and everything they import; fallback_test.go checks them against
// go-control-plane's types.
const (
	rbacHTTPType    = fastpath.TypePrefix + "envoy.extensions.filters.http.rbac.v3.RBAC"
	rbacNetworkType = fastpath.TypePrefix + "envoy.extensions.filters.network.rbac.v3.RBAC"
	allowPrefix     = "wasm-default-allow"
	denyPrefix      = "wasm-default-deny"
)

// Field numbers: http RBAC rules 1, rules_stat_prefix 6; network RBAC rules 1, stat_prefix 3.
var (
	rbacHTTPAllow    = rbac(false, 6, allowPrefix)
	rbacHTTPDeny     = rbac(true, 6, denyPrefix)
	rbacNetworkAllow = rbac(false, 3, allowPrefix)
	rbacNetworkDeny  = rbac(true, 3, denyPrefix)
)

func rbac(deny bool, prefixField protowire.Number, prefix string) []byte {
	var b []byte
	if deny {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, nil) // rules: an empty RBAC
	}
	b = protowire.AppendTag(b, prefixField, protowire.BytesType)
	return protowire.AppendString(b, prefix)
}

// fallback is the Any of a TypedExtensionConfig of the given name holding the allow-all
// (open) or deny-all RBAC filter of the Wasm filter's kind.
func fallback(name string, network, open bool) []byte {
	switch {
	case network && open:
		return typedExtensionConfig(name, rbacNetworkType, rbacNetworkAllow)
	case network:
		return typedExtensionConfig(name, rbacNetworkType, rbacNetworkDeny)
	case open:
		return typedExtensionConfig(name, rbacHTTPType, rbacHTTPAllow)
	default:
		return typedExtensionConfig(name, rbacHTTPType, rbacHTTPDeny)
	}
}

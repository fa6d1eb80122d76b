// Package envoyproto checks a rendered bootstrap against Envoy's own protos and merges a bootstrap
// override the way Envoy merges --config-yaml. It links Envoy's bootstrap protos, which the render
// path deliberately does not (see ARCHITECTURE.md), so only the code that validates or prints a
// merged bootstrap imports it.
package envoyproto

// Package tmpl executes Go text/template templates (parsed by text/template/parse) without
// reflect's method lookup by name. text/template's executor calls reflect.Value.MethodByName with
// names from the template, which makes the linker keep every exported method of every type in
// the binary (measured: +2.5 MB for pilot-agent). This executor follows text/template's
// semantics (the Option missingkey=zero behaviour) for fields, map keys, variables, pipelines,
// if/with/range/else, break/continue, define/template/block and the builtin functions; method
// calls are limited to what templates over Istio's bootstrap parameters use: protobuf getters
// (GetX on a generated message reads field X, or oneof member X) and String/Error through their
// interfaces. A differential test and fuzz target hold it to text/template's output.
package tmpl

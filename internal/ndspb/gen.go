// Package ndspb holds Go code for istio.networking.nds.v1.NameTable, generated from nds.proto
// and committed so that builds and tests need no protoc. Regenerate with `go generate`
// (needs protoc, protoc-gen-go and protoc-gen-go-vtproto on PATH).
package ndspb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size nds.proto

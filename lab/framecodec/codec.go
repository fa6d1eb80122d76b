// Package framecodec is a gRPC [encoding.CodecV2] for grpc-go servers and clients in tests that
// speak to the agent: it moves [fastpath.Frame] values without decoding them. The agent itself
// speaks gRPC through transport/h2grpc and links no grpc-go codec.
package framecodec

import (
	"fmt"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/fastpath"
)

// Codec moves *fastpath.Frame values: Unmarshal takes a reference to the received buffers and
// Marshal hands the frame's buffers to gRPC. Its name is "proto", so peers see the ordinary
// application/grpc+proto content type.
type Codec struct{}

// Name implements encoding.CodecV2.
func (Codec) Name() string { return "proto" }

// Marshal returns the frame's buffers with one extra reference each, which gRPC frees once
// written. The caller keeps its own reference and frees it after SendMsg returns.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*fastpath.Frame)
	if !ok {
		return nil, fmt.Errorf("framecodec: cannot marshal %T, want *fastpath.Frame", v)
	}
	f.Data.Ref()
	return f.Data, nil
}

// Unmarshal keeps a reference to data in the frame; v must be a *fastpath.Frame (what it held
// is freed).
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*fastpath.Frame)
	if !ok {
		return fmt.Errorf("framecodec: cannot unmarshal into %T, want *fastpath.Frame", v)
	}
	f.Free()
	data.Ref()
	f.Data = data
	return nil
}

package fastpath

import (
	"fmt"

	"google.golang.org/grpc/mem"
)

// Frame is one gRPC message held as the buffers it arrived in. The holder of a Frame owns one
// reference to each buffer and must call Free exactly once, or hand the Frame on.
type Frame struct {
	Data mem.BufferSlice
}

// Len is the message size in bytes.
func (f *Frame) Len() int { return f.Data.Len() }

// Free releases the frame's buffers and empties it. Calling Free on an empty frame is a no-op.
func (f *Frame) Free() {
	if f.Data != nil {
		f.Data.Free()
		f.Data = nil
	}
}

// Take moves the frame's buffers out, leaving f empty.
func (f *Frame) Take() Frame {
	out := Frame{Data: f.Data}
	f.Data = nil
	return out
}

// FrameOf wraps an encoded message held in b (not copied; b must not be modified afterwards).
func FrameOf(b []byte) Frame {
	return Frame{Data: mem.BufferSlice{mem.SliceBuffer(b)}}
}

// Codec is a gRPC [encoding.CodecV2] that moves *Frame values without decoding them: Unmarshal
// takes a reference to the received buffers and Marshal hands the frame's buffers to gRPC.
// Its name is "proto", so peers see the ordinary application/grpc+proto content type.
type Codec struct{}

// Name implements encoding.CodecV2.
func (Codec) Name() string { return "proto" }

// Marshal returns the frame's buffers with one extra reference each, which gRPC frees once
// written. The caller keeps its own reference and frees it after SendMsg returns.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*Frame)
	if !ok {
		return nil, fmt.Errorf("fastpath: cannot marshal %T, want *fastpath.Frame", v)
	}
	f.Data.Ref()
	return f.Data, nil
}

// Unmarshal keeps a reference to data in the frame; v must be an empty *Frame.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*Frame)
	if !ok {
		return fmt.Errorf("fastpath: cannot unmarshal into %T, want *fastpath.Frame", v)
	}
	f.Free()
	data.Ref()
	f.Data = data
	return nil
}

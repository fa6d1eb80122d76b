package fastpath

import "google.golang.org/grpc/mem"

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

package mux

import (
	"github.com/wingman-mesh/wingman/fastpath"
)

// deltaMerger merges pending Delta responses of one type by resource name (fastpath's
// MergeDeltaResponses: wire bytes, no decoding). The queue calls it under its lock, which also
// guards the Peeker.
func deltaMerger() merger {
	var p fastpath.Peeker
	return func(older, newer fastpath.Frame) (fastpath.Frame, error) {
		b, err := p.MergeDeltaResponses(nil, older.Data, newer.Data) // sized exactly
		if err != nil {
			return fastpath.Frame{}, err
		}
		return fastpath.FrameOf(b), nil
	}
}

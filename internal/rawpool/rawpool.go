// Package rawpool is a mem.BufferPool (gRPC's interface) for buffers that are always written in
// full before they are read: frame payloads read with io.ReadFull, pieces of a forwarded response
// read up to their length. gRPC's default pool clears every buffer it hands out, the whole
// capacity, so that a caller which reads before it writes sees no old bytes; on the forwarding
// path that clearing is pure cost (issue 30: about 5 % of the pilot-agent binary's CPU while it
// carried 4 MB pushes, perf/results/profile-binary.md). This pool hands buffers out as they were
// put back, so only code that overwrites every byte it later reads may use it.
package rawpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Size classes are powers of two from 1<<minShift to 1<<maxShift bytes; a larger request is
// allocated and dropped on Put.
const (
	minShift = 9  // 512 B
	maxShift = 20 // 1 MiB
)

// Pool is the pool. The zero value is not usable; use Default.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool
}

// Default is the process's pool of unzeroed buffers.
var Default = &Pool{}

var _ mem.BufferPool = (*Pool)(nil)

// class is the index of the smallest class holding n bytes, or -1 when n is too large.
func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	s := bits.Len(uint(n - 1))
	if s > maxShift {
		return -1
	}
	return s - minShift
}

// Get returns a buffer of length n whose bytes are whatever its last user left: the caller must
// write all of it (or reslice to what it wrote) before anything reads it.
func (p *Pool) Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.classes[c].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(c+minShift))
	return &b
}

// Put returns a buffer from Get; buffers of a capacity that is not a class are dropped.
func (p *Pool) Put(bp *[]byte) {
	c := cap(*bp)
	if c < 1<<minShift || c > 1<<maxShift || c&(c-1) != 0 {
		return
	}
	p.classes[bits.Len(uint(c))-1-minShift].Put(bp)
}

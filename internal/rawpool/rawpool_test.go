package rawpool

import "testing"

func TestClassesAndReuse(t *testing.T) {
	for _, tc := range []struct{ n, cap int }{{0, 512}, {1, 512}, {512, 512}, {513, 1024}, {16384, 16384}, {16385, 32768}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1}} {
		bp := Default.Get(tc.n)
		if len(*bp) != tc.n || cap(*bp) != tc.cap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*bp), cap(*bp), tc.n, tc.cap)
		}
		Default.Put(bp)
	}
	// A buffer put back comes back for a request of its class, resliced, not cleared (the
	// point of the pool); sync.Pool may drop it, so look for it a few times.
	p := &Pool{}
	for range 100 {
		bp := p.Get(1000)
		(*bp)[0] = 7
		p.Put(bp)
		if got := p.Get(600); cap(*got) == 1024 && len(*got) == 600 && (*got)[0] == 7 {
			return
		}
	}
	t.Error("a returned buffer was never handed out again")
}

func TestPutDropsForeignBuffers(t *testing.T) {
	p := &Pool{}
	b := make([]byte, 700) // not a class capacity
	p.Put(&b)
	if got := p.Get(700); cap(*got) != 1024 {
		t.Errorf("a foreign buffer of capacity 700 came back (cap %d)", cap(*got))
	}
}

func BenchmarkGetPut16K(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Default.Put(Default.Get(16 << 10))
	}
}

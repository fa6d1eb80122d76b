package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWriteAndRead: under -race, writes from one goroutine and reads from another
// are not a data race, and every write is kept whole.
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 1000 {
			if _, err := b.Write([]byte("ab")); err != nil {
				t.Error(err)
			}
		}
	})
	for range 100 {
		if s := b.String(); len(s)%2 != 0 {
			t.Fatalf("torn write: %d bytes", len(s))
		}
	}
	wg.Wait()
	if s := b.String(); s != strings.Repeat("ab", 1000) {
		t.Fatalf("got %d bytes, want 2000", len(s))
	}
}

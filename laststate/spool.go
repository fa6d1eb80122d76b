package laststate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/fastpath"
)

// message is a response being spooled as its pieces pass: written to its own file and scanned
// for its type URL, nonce and version, never held whole.
type message struct {
	f     *os.File
	sp    spooled
	scan  fastpath.ResponseScanner
	delta bool
	got   int
}

func (r *Recorder) nextSpool() string {
	r.seq++
	return filepath.Join(r.spool, strconv.Itoa(r.seq))
}

func (r *Recorder) newMessage(delta bool, size int) (*message, error) {
	name := r.nextSpool()
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	m := &message{f: f, sp: spooled{file: name, size: int64(size)}, delta: delta}
	m.scan.Reset(delta, size, nil)
	return m, nil
}

// feed spools the next bytes; done once the whole response is on disk and read.
func (m *message) feed(b []byte) (done bool, err error) {
	if m.got+len(b) > int(m.sp.size) {
		return false, fmt.Errorf("response longer than its %d bytes", m.sp.size)
	}
	if _, err := m.f.Write(b); err != nil {
		return false, err
	}
	if err := m.scan.Feed(b); err != nil {
		return false, err
	}
	m.got += len(b)
	if m.got < int(m.sp.size) {
		return false, nil
	}
	err = m.f.Close()
	m.f = nil
	if err != nil {
		return false, err
	}
	if m.delta {
		var resp fastpath.DeltaResponse
		err = m.scan.FinishDelta(&resp)
		m.sp.typeURL, m.sp.nonce, m.sp.version = resp.TypeURL, resp.Nonce, resp.Version
	} else {
		var resp fastpath.Response
		err = m.scan.FinishSotW(&resp)
		m.sp.typeURL, m.sp.nonce, m.sp.version = resp.TypeURL, resp.Nonce, resp.Version
	}
	if err == nil && m.sp.typeURL == "" {
		err = fmt.Errorf("response without a type URL")
	}
	return err == nil, err
}

func (m *message) discard() {
	if m.f != nil {
		m.f.Close()
		m.f = nil
	}
	_ = os.Remove(m.sp.file)
}

// spoolBytes writes b to a new spool file.
func (r *Recorder) spoolBytes(b []byte) (string, error) {
	name := r.nextSpool()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		return "", fmt.Errorf("last-state spool: %w", err)
	}
	return name, nil
}

// spoolFrom copies r to a new spool file.
func (r *Recorder) spoolFrom(src io.Reader) (string, error) {
	name := r.nextSpool()
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("last-state spool: %w", err)
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("last-state spool: %w", err)
	}
	return name, nil
}

// compact merges a Delta type's log into one response, the client's view of applying them in
// order: streamed from the spools (merge.go), or, for a response that merge does not read, with
// fastpath.MergeDeltaResponses, which holds the merged state in memory while it works.
func (r *Recorder) compact(tl *typeLog) error {
	if len(tl.entries) < 2 {
		return nil
	}
	files := make([]string, len(tl.entries))
	for i, sp := range tl.entries {
		files[i] = sp.file
	}
	file := r.nextSpool()
	size, err := mergeDeltaFiles(files, file, &r.merge)
	if err != nil {
		_ = os.Remove(file)
		if !errors.Is(err, errMergeUnsupported) {
			return err
		}
		return r.compactInMemory(tl)
	}
	r.replaceLog(tl, file, size)
	return nil
}

func (r *Recorder) replaceLog(tl *typeLog, file string, size int64) {
	last := tl.entries[len(tl.entries)-1]
	removeAll(tl.entries)
	tl.entries = append(tl.entries[:0], spooled{file: file, size: size, typeURL: last.typeURL, version: last.version, nonce: last.nonce})
}

func (r *Recorder) compactInMemory(tl *typeLog) error {
	var p fastpath.Peeker
	acc, err := os.ReadFile(tl.entries[0].file)
	if err != nil {
		return err
	}
	for _, sp := range tl.entries[1:] {
		next, err := os.ReadFile(sp.file)
		if err != nil {
			return err
		}
		if acc, err = p.MergeDeltaResponses(nil, mem.BufferSlice{mem.SliceBuffer(acc)}, mem.BufferSlice{mem.SliceBuffer(next)}); err != nil {
			return err
		}
	}
	file, err := r.spoolBytes(acc)
	if err != nil {
		return err
	}
	r.replaceLog(tl, file, int64(len(acc)))
	return nil
}

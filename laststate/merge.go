package laststate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/wingman-mesh/wingman/fastpath"
)

// A Delta type's accepted responses are stored as one: the state after applying them in order,
// so a restore sends one response and the client never passes through an older state. The merge
// is streamed from the spools to a new spool: two passes over the files, holding the names and
// where each resource is, never a response whole (fastpath.MergeDeltaResponses, which holds both
// messages and the result, is the fallback for what this one does not read).
//
// The merged response has the effect of fastpath.MergeDeltaResponses applied left to right:
//   - each name's last resource, in the order of the files (a resource a later response removes
//     or updates is left out);
//   - every field of the last response but its resources and removals (type URL, version, nonce,
//     control plane), as its bytes;
//   - the removals of names whose last mention is a removal (sorted).

// DeltaDiscoveryResponse fields the merge reads (envoy/service/discovery/v3/discovery.proto).
const (
	fieldResources    = 2 // repeated Resource
	fieldRemoved      = 6 // repeated string removed_resources
	fieldRemovedNames = 8 // repeated ResourceName removed_resource_names: not read here
)

var errMergeUnsupported = errors.New("not merged streamed")

// resourceRef is where one resource field (key, length and value) is in a spool.
type resourceRef struct {
	file    int
	off, n  int64
	removed bool // a removal, not a resource
}

// mergeScratch is what merges reuse: the recorder keeps one, so a merge at every snapshot write
// allocates no buffers.
type mergeScratch struct {
	r     *bufio.Reader
	w     *bufio.Writer
	buf   []byte
	namer resourceNamer
}

func (m *mergeScratch) init() {
	if m.buf == nil {
		m.r = bufio.NewReaderSize(nil, 32<<10)
		m.w = bufio.NewWriterSize(nil, 32<<10)
		m.buf = make([]byte, 32<<10)
		m.namer.buf = make([]byte, 32<<10)
	}
}

// mergeDeltaFiles writes to dst the merge of the Delta responses in files, in order, and returns
// its size. m may be nil.
func mergeDeltaFiles(files []string, dst string, m *mergeScratch) (int64, error) {
	if m == nil {
		m = &mergeScratch{}
	}
	m.init()
	last := map[string]int{} // name: index in refs of its last mention
	var refs []resourceRef
	var names []string // by ref
	var others []resourceRef
	for i, file := range files {
		err := indexDelta(file, m, func(name string, ref resourceRef) {
			ref.file = i
			last[name] = len(refs)
			refs = append(refs, ref)
			names = append(names, name)
		}, func(ref resourceRef) {
			if i == len(files)-1 {
				ref.file = i
				others = append(others, ref)
			}
		})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", file, err)
		}
	}
	var size int64
	var removals []string
	for idx, ref := range refs {
		if last[names[idx]] != idx {
			continue
		}
		if ref.removed {
			removals = append(removals, names[idx])
			size += int64(1 + uvarintLen(uint64(len(names[idx]))) + len(names[idx]))
			continue
		}
		size += ref.n
	}
	for _, o := range others {
		size += o.n
	}
	slices.Sort(removals)

	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	w, buf := m.w, m.buf // one buffer for every copy: io.Copy would take one per resource
	w.Reset(out)
	defer w.Reset(nil)
	copyRefs := func(file string, pick func(idx int, ref resourceRef) bool, list []resourceRef) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		for idx, ref := range list {
			if !pick(idx, ref) {
				continue
			}
			for off, end := ref.off, ref.off+ref.n; off < end; {
				n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
				if n > 0 {
					if _, werr := w.Write(buf[:n]); werr != nil {
						return werr
					}
					off += int64(n)
				}
				if err != nil && off < end {
					return err
				}
			}
		}
		return nil
	}
	for i, file := range files {
		err = copyRefs(file, func(idx int, ref resourceRef) bool {
			return ref.file == i && !ref.removed && last[names[idx]] == idx
		}, refs)
		if err != nil {
			break
		}
	}
	if err == nil {
		err = copyRefs(files[len(files)-1], func(int, resourceRef) bool { return true }, others)
	}
	var scratch []byte
	for _, name := range removals {
		if err != nil {
			break
		}
		scratch = binary.AppendUvarint(append(scratch[:0], fieldRemoved<<3|2), uint64(len(name)))
		scratch = append(scratch, name...)
		_, err = w.Write(scratch)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return size, nil
}

// indexDelta walks the top-level fields of the Delta response in file, streamed: resource gets
// each resource and removal with its name, other each other field.
func indexDelta(file string, m *mergeScratch, resource func(name string, ref resourceRef), other func(ref resourceRef)) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m.r.Reset(f)
	defer m.r.Reset(nil)
	wr := &wireReader{r: m.r, size: st.Size()}
	namer := &m.namer
	for wr.off < wr.size {
		start := wr.off
		key, err := wr.uvarint()
		if err != nil {
			return err
		}
		field, wt := key>>3, key&7
		switch wt {
		case 0:
			_, err = wr.uvarint()
		case 1:
			err = wr.skip(8)
		case 5:
			err = wr.skip(4)
		case 2:
			var n uint64
			if n, err = wr.uvarint(); err != nil {
				return err
			}
			if n > uint64(wr.size-wr.off) {
				return fmt.Errorf("field %d: %w", field, fastpath.ErrTruncated)
			}
			switch field {
			case fieldResources:
				name, err := namer.name(wr, int64(n))
				if err != nil {
					return err
				}
				resource(name, resourceRef{off: start, n: wr.off - start})
				continue
			case fieldRemoved:
				b := make([]byte, n)
				if _, err = io.ReadFull(wr, b); err != nil {
					return err
				}
				resource(string(b), resourceRef{off: start, n: wr.off - start, removed: true})
				continue
			case fieldRemovedNames:
				return errMergeUnsupported
			}
			err = wr.skip(int64(n))
		default:
			return errMergeUnsupported // groups
		}
		if err != nil {
			return err
		}
		other(resourceRef{off: start, n: wr.off - start})
	}
	return nil
}

// wireReader reads protobuf wire data from a file, counting its offset.
type wireReader struct {
	r         *bufio.Reader
	off, size int64
}

func (w *wireReader) Read(p []byte) (int, error) {
	if left := w.size - w.off; int64(len(p)) > left {
		p = p[:left]
	}
	if len(p) == 0 {
		return 0, io.EOF
	}
	n, err := w.r.Read(p)
	w.off += int64(n)
	return n, err
}

func (w *wireReader) ReadByte() (byte, error) {
	if w.off >= w.size {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := w.r.ReadByte()
	if err == nil {
		w.off++
	}
	return b, err
}

func (w *wireReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(w)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return v, err
}

func (w *wireReader) skip(n int64) error {
	if n > w.size-w.off {
		return fastpath.ErrTruncated
	}
	m, err := w.r.Discard(int(n))
	w.off += int64(m)
	return err
}

// resourceNamer reads a Delta Resource's name as fastpath reads it: the Resource is passed, in
// pieces, through a ResponseScanner as the only resource of a response.
type resourceNamer struct {
	scan fastpath.ResponseScanner
	buf  []byte
	got  string
	seen bool
}

func (rn *resourceNamer) name(r io.Reader, n int64) (string, error) {
	var prefix [1 + binary.MaxVarintLen64]byte
	prefix[0] = fieldResources<<3 | 2
	k := 1 + binary.PutUvarint(prefix[1:], uint64(n))
	rn.got, rn.seen = "", false
	rn.scan.Reset(true, k+int(n), func(kind fastpath.NameKind, name, _ []byte) {
		if kind == fastpath.Updated {
			rn.got, rn.seen = string(name), true
		}
	})
	if err := rn.scan.Feed(prefix[:k]); err != nil {
		return "", err
	}
	if rn.buf == nil {
		rn.buf = make([]byte, 32<<10)
	}
	for left := n; left > 0; {
		m, err := io.ReadFull(r, rn.buf[:min(int64(len(rn.buf)), left)])
		if err != nil {
			return "", err
		}
		if err := rn.scan.Feed(rn.buf[:m]); err != nil {
			return "", err
		}
		left -= int64(m)
	}
	if !rn.seen || rn.got == "" {
		return "", fmt.Errorf("%w: %v", errMergeUnsupported, fastpath.ErrUnnamedResource)
	}
	return rn.got, nil
}

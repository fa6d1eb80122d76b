package laststate

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
)

// The snapshot file: the magic and format version, then records (a tag byte, the payload's
// length as a uvarint, the payload), closed by an end record whose payload is the SHA-256 of
// every byte before it. Strings inside payloads are uvarint-length-prefixed.
//
//	meta       node id, namespace, service account, trust domain, written-at (unix ns, 8 bytes BE)
//	certs      certificate chain PEM, key PEM, roots PEM
//	nametable  the DNS proxy's NameTable the agent last accepted: the resource's bytes as Istiod
//	           sent them (the whole payload); at most one, after meta and certs, before any stream
//	stream     1 byte (1: Delta), the stream's node id: the responses that follow are its
//	response   type URL, version, then the response's wire bytes (the rest of the payload)
//	end        32 bytes of SHA-256
//
// A file of another format version is refused whole (ErrVersion), never read in part: format 2
// added the nametable record; a format-1 snapshot is refused, with a warning naming both versions,
// and the agent starts as without one (a container restart runs the same image, so only a
// snapshot left by an agent of another release meets this).
const (
	magic         = "WMLSTATE"
	formatVersion = 2

	tagMeta      = 1
	tagCerts     = 2
	tagStream    = 3
	tagResponse  = 4
	tagNameTable = 5
	tagEnd       = 0xff

	// DefaultMaxBytes bounds a snapshot file: mux's largest xDS message (64 MiB) twice over would
	// not fit, one large configuration does. A snapshot that would exceed it is not written.
	DefaultMaxBytes = 64 << 20
)

// Identity is whom a snapshot belongs to: restored only by an agent of the same pod.
type Identity struct {
	NodeID, Namespace, ServiceAccount, TrustDomain string
}

// Certs is the workload certificate material in PEM.
type Certs struct {
	Chain, Key, Roots []byte
}

// Response is one response a client ACKed, as forwarded: its bytes in Data (Decode) or, for a
// snapshot opened with Load, in the file at off (read with Snapshot.Open).
type Response struct {
	TypeURL, Version string
	Data             []byte
	off, size        int64
}

// Size is the response's length in bytes.
func (r Response) Size() int64 {
	if r.Data != nil {
		return int64(len(r.Data))
	}
	return r.size
}

// Stream is what one client stream (by protocol and node id) last accepted, per type; for Delta
// the responses of a type in the order they were applied.
type Stream struct {
	Delta     bool
	NodeID    string
	Responses []Response
}

// Snapshot is a decoded snapshot file.
type Snapshot struct {
	Identity Identity
	Written  time.Time
	Certs    Certs
	// NameTable is the DNS proxy's name table the agent last accepted (TypeURL
	// fastpath.NameTableType, no version: the bytes of the NameTable resource, read with Open or
	// ReadNameTable); nil when the snapshot holds none.
	NameTable *Response
	Streams   []Stream

	file io.ReaderAt // Load's: where the responses' bytes are; nil when they are in Data
	cls  io.Closer
}

// Open returns a reader of a response's bytes.
func (s *Snapshot) Open(r Response) io.Reader {
	if s.file == nil || r.Data != nil {
		return bytes.NewReader(r.Data)
	}
	return io.NewSectionReader(s.file, r.off, r.size)
}

// Close releases the file of a snapshot opened with Load.
func (s *Snapshot) Close() error {
	if s.cls == nil {
		return nil
	}
	err := s.cls.Close()
	s.cls, s.file = nil, nil
	return err
}

// encoder writes a snapshot, record by record, through the checksum.
type encoder struct {
	w       *bufio.Writer
	h       hash.Hash
	n       int64 // bytes written
	scratch []byte
	err     error
}

func newEncoder(w io.Writer) *encoder {
	e := &encoder{h: sha256.New()}
	e.w = bufio.NewWriterSize(io.MultiWriter(w, e.h), 32<<10)
	e.raw([]byte(magic))
	e.raw([]byte{formatVersion})
	return e
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) header(tag byte, n int) {
	e.scratch = append(e.scratch[:0], tag)
	e.scratch = binary.AppendUvarint(e.scratch, uint64(n))
	e.raw(e.scratch)
}

func strLen(s []byte) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// record writes a record made of length-prefixed strings and, last, tail unprefixed.
func (e *encoder) record(tag byte, fields [][]byte, tail []byte) {
	e.fields(tag, fields, int64(len(tail)))
	e.raw(tail)
}

// fields writes a record's header, for its length-prefixed fields and tailLen bytes after them,
// and the fields.
func (e *encoder) fields(tag byte, fields [][]byte, tailLen int64) {
	n := int(tailLen)
	for _, f := range fields {
		n += strLen(f)
	}
	e.header(tag, n)
	for _, f := range fields {
		e.scratch = binary.AppendUvarint(e.scratch[:0], uint64(len(f)))
		e.raw(e.scratch)
		e.raw(f)
	}
}

func (e *encoder) meta(id Identity, written time.Time) {
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(written.UnixNano()))
	e.record(tagMeta, [][]byte{[]byte(id.NodeID), []byte(id.Namespace), []byte(id.ServiceAccount), []byte(id.TrustDomain)}, ts[:])
}

func (e *encoder) certs(c Certs) { e.record(tagCerts, [][]byte{c.Chain, c.Key, c.Roots}, nil) }

// nameTable writes the nametable record, size bytes read from r.
func (e *encoder) nameTable(size int64, r io.Reader) {
	e.fields(tagNameTable, nil, size)
	if e.err != nil {
		return
	}
	m, err := io.CopyN(e.w, r, size)
	e.n += m
	if err != nil {
		e.err = fmt.Errorf("copy the name table: %w", err)
	}
}

func (e *encoder) stream(delta bool, nodeID string) {
	d := byte(0)
	if delta {
		d = 1
	}
	e.record(tagStream, [][]byte{{d}, []byte(nodeID)}, nil)
}

// response writes a response record whose data, size bytes, is read from r (streamed: a large
// response is never held whole).
func (e *encoder) response(typeURL, version string, size int64, r io.Reader) {
	e.fields(tagResponse, [][]byte{[]byte(typeURL), []byte(version)}, size)
	if e.err != nil {
		return
	}
	m, err := io.CopyN(e.w, r, size)
	e.n += m
	if err != nil {
		e.err = fmt.Errorf("copy %s response: %w", typeURL, err)
	}
}

// close writes the end record and flushes.
func (e *encoder) close() error {
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.err
	}
	sum := e.h.Sum(nil)
	e.header(tagEnd, len(sum))
	e.raw(sum)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

// Decode errors: every refusal says which of these it is.
var (
	ErrOversized = errors.New("snapshot larger than its bound")
	ErrCorrupt   = errors.New("snapshot corrupt")
	ErrTruncated = errors.New("snapshot truncated")
	ErrVersion   = errors.New("snapshot of another format version")
)

// Decode reads a whole snapshot of size bytes from r. It refuses one above max, of another
// format version, cut short, or whose checksum or records do not hold, and returns nothing of
// it then: a snapshot is used whole or not at all.
func Decode(r io.Reader, size, max int64) (*Snapshot, error) { return decode(r, size, max, true) }

// decode is Decode; without keep, response bytes are passed through the checksum and only their
// place in the file is kept (a large configuration is never read whole into memory).
func decode(r io.Reader, size, max int64, keep bool) (*Snapshot, error) {
	if size > max {
		return nil, fmt.Errorf("%w: %d bytes, bound %d", ErrOversized, size, max)
	}
	h := sha256.New()
	d := &decoder{r: bufio.NewReaderSize(io.LimitReader(r, size), 32<<10), left: size, h: h}
	head := make([]byte, len(magic)+1)
	if err := d.full(head); err != nil {
		return nil, err
	}
	if string(head[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: not a snapshot file (magic %q)", ErrCorrupt, head[:len(magic)])
	}
	if head[len(magic)] != formatVersion {
		return nil, fmt.Errorf("%w: format %d, this agent reads only format %d", ErrVersion, head[len(magic)], formatVersion)
	}
	snap := &Snapshot{}
	var cur *Stream
	seenMeta, seenCerts := false, false
	for {
		sumBefore := h.Sum(nil) // what the end record must hold, if this is it
		tag, err := d.byte()
		if err != nil {
			return nil, err
		}
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(d.left) {
			return nil, fmt.Errorf("%w: record of %d bytes with %d left", ErrTruncated, n, d.left)
		}
		if tag == tagNameTable && (snap.NameTable != nil || !seenMeta || !seenCerts || cur != nil) {
			return nil, fmt.Errorf("%w: name table record out of place", ErrCorrupt)
		}
		if tag == tagNameTable && !keep {
			off := size - d.left
			if err := d.skim(int64(n)); err != nil {
				return nil, err
			}
			snap.NameTable = &Response{TypeURL: fastpath.NameTableType, off: off, size: int64(n)}
			continue
		}
		if tag == tagResponse && !keep {
			if cur == nil {
				return nil, fmt.Errorf("%w: bad response record", ErrCorrupt)
			}
			resp, err := d.indexResponse(int64(n), size)
			if err != nil {
				return nil, err
			}
			cur.Responses = append(cur.Responses, resp)
			continue
		}
		// The payload is read before its checksum is known; its length is bounded by the file.
		p := make([]byte, n)
		if err := d.full(p); err != nil {
			return nil, err
		}
		f := fields{b: p}
		switch tag {
		case tagEnd:
			if len(p) != sha256.Size || string(p) != string(sumBefore[:len(p)]) {
				return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
			}
			if d.left != 0 {
				return nil, fmt.Errorf("%w: %d bytes after the end record", ErrCorrupt, d.left)
			}
			if !seenMeta || !seenCerts {
				return nil, fmt.Errorf("%w: no identity or certificate record", ErrCorrupt)
			}
			return snap, nil
		case tagMeta:
			if seenMeta {
				return nil, fmt.Errorf("%w: two identity records", ErrCorrupt)
			}
			seenMeta = true
			id := &snap.Identity
			for _, s := range []*string{&id.NodeID, &id.Namespace, &id.ServiceAccount, &id.TrustDomain} {
				*s = string(f.str())
			}
			ts := f.rest()
			if f.err != nil || len(ts) != 8 {
				return nil, fmt.Errorf("%w: bad identity record", ErrCorrupt)
			}
			snap.Written = time.Unix(0, int64(binary.BigEndian.Uint64(ts)))
		case tagCerts:
			if seenCerts {
				return nil, fmt.Errorf("%w: two certificate records", ErrCorrupt)
			}
			seenCerts = true
			snap.Certs = Certs{Chain: f.str(), Key: f.str(), Roots: f.str()}
			if f.err != nil || len(f.rest()) != 0 {
				return nil, fmt.Errorf("%w: bad certificate record", ErrCorrupt)
			}
		case tagNameTable:
			snap.NameTable = &Response{TypeURL: fastpath.NameTableType, Data: p}
		case tagStream:
			d, id := f.str(), f.str()
			if f.err != nil || len(d) != 1 || d[0] > 1 || len(f.rest()) != 0 {
				return nil, fmt.Errorf("%w: bad stream record", ErrCorrupt)
			}
			snap.Streams = append(snap.Streams, Stream{Delta: d[0] == 1, NodeID: string(id)})
			cur = &snap.Streams[len(snap.Streams)-1]
		case tagResponse:
			typeURL, version := f.str(), f.str()
			if f.err != nil || cur == nil || len(typeURL) == 0 {
				return nil, fmt.Errorf("%w: bad response record", ErrCorrupt)
			}
			cur.Responses = append(cur.Responses, Response{TypeURL: string(typeURL), Version: string(version), Data: f.rest()})
		default:
			return nil, fmt.Errorf("%w: unknown record tag %d", ErrCorrupt, tag)
		}
	}
}

// decoder reads the file; every byte consumed goes through the checksum.
type decoder struct {
	r    *bufio.Reader
	left int64
	h    hash.Hash
	one  [1]byte
}

func (d *decoder) full(p []byte) error {
	n, err := io.ReadFull(d.r, p)
	d.left -= int64(n)
	d.h.Write(p[:n])
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	return nil
}

// indexResponse reads a response record's type URL and version and passes its bytes through the
// checksum, keeping only where they are.
func (d *decoder) indexResponse(n, size int64) (Response, error) {
	start := d.left
	var fields [2][]byte
	for i := range fields {
		l, err := d.uvarint()
		if err != nil {
			return Response{}, err
		}
		// What is left of the record: negative when the length itself ran past its end (a
		// uint64 conversion of that let a length of terabytes through, found by FuzzDecode).
		if left := n - (start - d.left); left < 0 || l > uint64(left) {
			return Response{}, fmt.Errorf("%w: bad response record", ErrCorrupt)
		}
		fields[i] = make([]byte, l)
		if err := d.full(fields[i]); err != nil {
			return Response{}, err
		}
	}
	if len(fields[0]) == 0 {
		return Response{}, fmt.Errorf("%w: bad response record", ErrCorrupt)
	}
	rest := n - (start - d.left)
	if rest < 0 {
		return Response{}, fmt.Errorf("%w: bad response record", ErrCorrupt)
	}
	resp := Response{TypeURL: string(fields[0]), Version: string(fields[1]), off: size - d.left, size: rest}
	if err := d.skim(rest); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// skim passes n bytes through the checksum without keeping them.
func (d *decoder) skim(n int64) error {
	m, err := io.CopyN(d.h, d.r, n)
	d.left -= m
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	return nil
}

func (d *decoder) byte() (byte, error) {
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("%w: no end record", ErrTruncated)
	}
	d.left--
	d.one[0] = b
	d.h.Write(d.one[:])
	return b, nil
}

func (d *decoder) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: bad length", ErrCorrupt)
}

// fields reads length-prefixed strings out of a payload.
type fields struct {
	b   []byte
	err error
}

func (f *fields) str() []byte {
	if f.err != nil {
		return nil
	}
	n, k := binary.Uvarint(f.b)
	if k <= 0 || n > uint64(len(f.b)-k) {
		f.err = ErrCorrupt
		return nil
	}
	s := f.b[k : k+int(n)]
	f.b = f.b[k+int(n):]
	return s
}

func (f *fields) rest() []byte {
	r := f.b
	f.b = nil
	return r
}

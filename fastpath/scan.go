package fastpath

import (
	"errors"
	"fmt"
)

// ResponseScanner peeks a DiscoveryResponse or DeltaDiscoveryResponse fed in pieces, for a proxy
// that forwards a response while it is still arriving (cut-through). It is the one response
// parser: [Peeker.PeekResponse] and [Peeker.PeekDeltaResponse] feed it a whole message, so any
// split of the bytes gives the same results and the same errors. Memory is bounded by the small fields
// it keeps (type URL, nonce, versions, the current resource's name and version), never by a
// resource body, which it skips as it passes without reading or copying it.
//
// Use: [ResponseScanner.Reset] with the message's length (known from the gRPC prefix),
// [ResponseScanner.Feed] the bytes in order, then [ResponseScanner.FinishSotW] or
// [ResponseScanner.FinishDelta]. [ResponseScanner.EarlyTypeURL] tells the type as soon as it has
// passed. Reusable: reset between messages; in steady state it allocates nothing. Not safe for
// concurrent use; the zero value is ready to Reset.
type ResponseScanner struct {
	delta bool
	size  int // length of the message
	pos   int // bytes fed so far
	visit func(kind NameKind, name, version []byte)
	err   error // sticky: the first error

	// Nesting: frames[0] is the message, frames[1] a delta Resource or (SotW) a resource's
	// Any read for its type_url, frames[2] (delta) a Resource's Any read for its type_url.
	frames [3]frame
	depth  int

	// The token being read.
	mode  scanMode
	v     uint64 // varint being read (key, length or skipped value)
	vn    int    // bytes of it read
	need  int    // bytes still to skip or collect
	then  action // what the length being read, or the bytes being collected, are for
	group int    // depth of the groups being skipped, 0 when none; counted as Cursor.skipGroup does
	buf   []byte // a value being collected across pieces (string fields, removed names)

	// What has been read.
	resources, removed       int
	name, version            []byte // of the current delta Resource
	hasName, hasVersion      bool
	typeURL, ver, nonce      string // kept between messages to reuse equal strings
	hasType, hasVer, hasNonc bool
	early                    string
	earlyOK                  bool
}

// frame is one length-delimited message being walked.
type frame struct {
	end   int       // offset of its end in the message
	kind  frameKind // what it is
	field int       // field whose value is being read, 0 between fields
}

type frameKind uint8

const (
	frameMessage  frameKind = iota // the response
	frameResource                  // a delta Resource: read strictly: its name and version are reported
	frameAny                       // a resource's Any: read for its type_url only, leniently
)

type scanMode uint8

const (
	modeKey     scanMode = iota // reading a field key
	modeVarint                  // skipping a varint value
	modeLen                     // reading a length prefix, for then
	modeSkip                    // skipping need bytes
	modeCollect                 // collecting need bytes, for then
)

type action uint8

const (
	actSkip     action = iota // skip the value
	actString                 // a top-level string field: version, type URL or nonce
	actRemoved                // a delta removed_resources name
	actResource               // a delta Resource
	actAny                    // a resource's Any, until a type URL is known
	actAnyType                // that Any's type_url
	actName                   // the current Resource's name
	actVersion                // the current Resource's version
)

// Reset prepares the scanner for a message of size bytes: a DeltaDiscoveryResponse when delta,
// else a DiscoveryResponse. visit, which may be nil, is called as [Peeker.PeekDeltaResponse]
// calls it, in the same order, as soon as each name has passed (a Resource's at its end); the
// slices are only valid during the call. SotW never calls it.
func (s *ResponseScanner) Reset(delta bool, size int, visit func(kind NameKind, name, version []byte)) {
	*s = ResponseScanner{
		delta: delta, size: size, visit: visit,
		frames: [3]frame{{end: size, kind: frameMessage}},
		buf:    keepSmall(s.buf), name: keepSmall(s.name), version: keepSmall(s.version),
		typeURL: s.typeURL, ver: s.ver, nonce: s.nonce, early: s.early,
	}
	if size < 0 {
		s.err = fmt.Errorf("fastpath: negative message size %d", size)
	}
}

// keepSmall empties b for reuse, or drops it when an unusually long name grew it.
func keepSmall(b []byte) []byte {
	if cap(b) > maxPeekString {
		return nil
	}
	return b[:0]
}

// EarlyTypeURL returns the message's type URL as soon as it is known: the top-level type_url once
// one has been read completely, else the first type_url read completely in a resource's
// google.protobuf.Any (SotW: resources is the Any; Delta: the Any is field 2 of a Resource),
// which is the first resource's unless that one has none. Istiod marshals in field-number order,
// so for a large push the Any's comes first, within the first few hundred bytes. The Anys are
// read for this hint only, until it is known: a malformed one is passed over (protobuf does not
// read an Any's contents when it decodes the response, so a response is never refused for them). Known type URLs are returned
// without allocating.
func (s *ResponseScanner) EarlyTypeURL() (string, bool) {
	if s.hasType {
		return s.typeURL, true
	}
	if !s.earlyOK {
		return "", false
	}
	return s.early, true
}

// Fed is the number of bytes fed so far.
func (s *ResponseScanner) Fed() int { return s.pos }

// FinishSotW returns what was read of the DiscoveryResponse, once exactly the message's size
// has been fed. It is an error if fewer were, or if the scanner was reset for a
// delta response.
func (s *ResponseScanner) FinishSotW(r *Response) error {
	*r = Response{}
	if err := s.finish(false); err != nil {
		return err
	}
	*r = Response{Resources: s.resources}
	r.TypeURL, r.Version, r.Nonce = s.seen()
	return nil
}

// FinishDelta returns what was read of the DeltaDiscoveryResponse, as
// [ResponseScanner.FinishSotW] does for SotW.
func (s *ResponseScanner) FinishDelta(r *DeltaResponse) error {
	*r = DeltaResponse{}
	if err := s.finish(true); err != nil {
		return err
	}
	*r = DeltaResponse{Resources: s.resources, Removed: s.removed}
	r.TypeURL, r.Version, r.Nonce = s.seen()
	return nil
}

// seen returns the type URL, version and nonce of the message, each empty when it was absent
// (the kept strings may be the previous message's, reused when they repeat).
func (s *ResponseScanner) seen() (typeURL, version, nonce string) {
	if s.hasType {
		typeURL = s.typeURL
	}
	if s.hasVer {
		version = s.ver
	}
	if s.hasNonc {
		nonce = s.nonce
	}
	return typeURL, version, nonce
}

func (s *ResponseScanner) finish(delta bool) error {
	if s.err != nil {
		return s.err
	}
	if delta != s.delta {
		return fmt.Errorf("fastpath: scanner reset for delta=%t, finished as delta=%t", s.delta, delta)
	}
	if s.pos < s.size {
		return fmt.Errorf("%s: %w: %d of %d bytes fed", s.msgName(), ErrTruncated, s.pos, s.size)
	}
	if s.depth != 0 || s.mode != modeKey || s.vn != 0 || s.group != 0 {
		// Not reachable: every value is checked against its frame's end as it starts.
		return fmt.Errorf("%s: %w", s.msgName(), ErrTruncated)
	}
	return nil
}

func (s *ResponseScanner) msgName() string {
	if s.delta {
		return "DeltaDiscoveryResponse"
	}
	return "DiscoveryResponse"
}

// Feed reads the next bytes of the message; b may be split anywhere. It returns an error on
// malformed wire data (the same error whatever the split, from the piece where the fault lies,
// worded as the request parser words its own) and when more bytes than the message's size are fed. After an error, every call
// returns it. b is not retained.
func (s *ResponseScanner) Feed(b []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(b) > s.size-s.pos {
		s.err = fmt.Errorf("%s: %d bytes fed after %d of a %d-byte message", s.msgName(), len(b), s.pos, s.size)
		return s.err
	}
	for {
		if s.pos == s.frames[s.depth].end && s.mode != modeSkip && s.mode != modeCollect {
			// At the end of a frame: between fields it closes, inside a varint (a key just
			// read announces a value) it is cut short, as Cursor.Varint finds it.
			switch {
			case s.mode != modeKey || s.vn != 0:
				s.bad(ErrTruncated)
			case s.group > 0:
				s.bad(ErrTruncated) // a group that does not end inside its parent
			case s.depth == 0:
				return nil // len(b) == 0: the size check above
			default:
				s.pop()
			}
			if s.err != nil {
				return s.err
			}
			continue
		}
		if len(b) == 0 {
			return nil
		}
		switch s.mode {
		case modeSkip:
			k := min(s.need, len(b))
			b = b[k:]
			s.pos += k
			if s.need -= k; s.need == 0 {
				s.valueDone()
			}
		case modeCollect:
			b = s.collect(b)
		default: // a varint: key, length or skipped value
			var done bool
			var err error
			if b, done, err = s.varint(b); err != nil {
				s.bad(err)
			} else if done {
				v := s.v
				s.v, s.vn = 0, 0
				switch s.mode {
				case modeKey:
					s.key(v)
				case modeLen:
					s.length(v)
				default:
					s.valueDone()
				}
			}
		}
		if s.err != nil {
			return s.err
		}
	}
}

// varint continues the varint in s.v with b, within the current frame, as Cursor.Varint reads
// one: a frame ending inside it is ErrTruncated, a tenth byte with its continuation bit set is
// errOverflow.
func (s *ResponseScanner) varint(b []byte) ([]byte, bool, error) {
	end := s.frames[s.depth].end
	for len(b) > 0 {
		if s.pos == end {
			return b, false, ErrTruncated
		}
		c := b[0]
		b = b[1:]
		s.pos++
		s.v |= uint64(c&0x7f) << (7 * s.vn)
		s.vn++
		if c < 0x80 {
			return b, true, nil
		}
		if s.vn == 10 {
			return b, false, errOverflow
		}
	}
	if s.pos == end {
		return b, false, ErrTruncated
	}
	return b, false, nil
}

// key dispatches on a field key just read.
func (s *ResponseScanner) key(k uint64) {
	f, wt := k>>3, int(k&7)
	limit := uint64(maxField)
	if s.group > 0 {
		limit = maxGroupField // a key inside a skipped group, as Cursor.skipGroup reads it
	}
	if f == 0 || f > limit {
		s.bad(fmt.Errorf("fastpath: invalid field number %d", f))
		return
	}
	if s.group > 0 { // inside a skipped group, as Cursor.skipGroup
		switch wt {
		case wireStart:
			if s.group++; s.group > 64 {
				s.bad(errors.New("fastpath: groups nested too deep"))
			}
		case wireEnd:
			if s.group--; s.group == 0 {
				s.valueDone()
			}
		default:
			s.skipValue(wt)
		}
		return
	}
	fr := &s.frames[s.depth]
	fr.field = int(f)
	if wt != wireBytes {
		s.skipValue(wt)
		return
	}
	s.mode, s.then = modeLen, actSkip
	switch fr.kind {
	case frameMessage:
		switch {
		case f == respVersion || f == respTypeURL || f == respNonce: // same numbers in both messages
			s.then = actString
		case f == respResource: // = drespResources
			s.resources++
			if s.delta {
				s.then = actResource
			} else if s.wantAny() {
				s.then = actAny
			}
		case f == drespRemoved && s.delta:
			s.removed++
			s.then = actRemoved
		}
	case frameResource:
		switch {
		case f == resName:
			s.then = actName
		case f == resVersion:
			s.then = actVersion
		case f == resResource && s.wantAny():
			s.then = actAny
		}
	case frameAny:
		if f == anyTypeURL {
			s.then = actAnyType
		}
	}
}

// wantAny says whether the next resource's Any is to be read for its type URL: until a type
// URL is known.
func (s *ResponseScanner) wantAny() bool { return !s.earlyOK && !s.hasType }

// skipValue starts skipping a value of wire type wt, as Cursor.SkipValue.
func (s *ResponseScanner) skipValue(wt int) {
	switch wt {
	case wireVarint:
		s.mode = modeVarint
	case wireFixed64:
		s.skip(8)
	case wireFixed32:
		s.skip(4)
	case wireBytes:
		s.mode, s.then = modeLen, actSkip
	case wireStart:
		s.group = 1
		s.mode = modeKey
	default:
		s.bad(fmt.Errorf("fastpath: unexpected wire type %d", wt))
	}
}

// skip starts skipping n bytes of the current frame.
func (s *ResponseScanner) skip(n int) {
	if n > s.frames[s.depth].end-s.pos {
		s.bad(ErrTruncated)
		return
	}
	if n == 0 {
		s.valueDone()
		return
	}
	s.mode, s.need = modeSkip, n
}

// length acts on a length prefix just read.
func (s *ResponseScanner) length(v uint64) {
	left := s.frames[s.depth].end - s.pos
	if v > uint64(left) {
		s.bad(ErrTruncated)
		return
	}
	n := int(v)
	switch s.then {
	case actSkip:
		s.skip(n)
	case actResource, actAny:
		kind := frameResource
		if s.then == actAny {
			kind = frameAny
		} else {
			s.name, s.version = s.name[:0], s.version[:0]
			s.hasName, s.hasVersion = false, false
		}
		s.depth++
		s.frames[s.depth] = frame{end: s.pos + n, kind: kind}
		s.mode = modeKey
	default:
		if (s.then == actString || s.then == actAnyType) && n > maxPeekString {
			s.bad(fmt.Errorf("fastpath: string field of %d bytes exceeds %d", n, maxPeekString))
			return
		}
		switch s.then {
		case actName:
			s.name, s.hasName = s.name[:0], true
		case actVersion:
			s.version, s.hasVersion = s.version[:0], true
		}
		s.buf = s.buf[:0]
		s.mode, s.need = modeCollect, n
		if n == 0 {
			s.collected(s.buf)
		}
	}
}

// collect takes the next bytes of a value being collected from b and returns the rest of b.
// A value lying whole in b is used in place; one split across pieces is gathered in a buffer
// kept by the scanner (a Resource's name and version always are: they are reported at its end).
func (s *ResponseScanner) collect(b []byte) []byte {
	k := min(s.need, len(b))
	s.pos += k
	s.need -= k
	switch s.then {
	case actName:
		s.name = append(s.name, b[:k]...)
	case actVersion:
		s.version = append(s.version, b[:k]...)
	default:
		if len(s.buf) == 0 && s.need == 0 {
			s.collected(b[:k])
			return b[k:]
		}
		s.buf = append(s.buf, b[:k]...)
	}
	if s.need == 0 {
		s.collected(s.buf)
	}
	return b[k:]
}

// collected acts on a value collected whole.
func (s *ResponseScanner) collected(v []byte) {
	switch s.then {
	case actString:
		switch s.frames[0].field {
		case respVersion:
			keep(&s.ver, v)
			s.hasVer = true
		case respTypeURL:
			keepType(&s.typeURL, v)
			s.hasType = true
		case respNonce:
			keep(&s.nonce, v)
			s.hasNonc = true
		}
	case actRemoved:
		if s.visit != nil {
			s.visit(Removed, present(v), nil)
		}
	case actAnyType:
		if !s.earlyOK {
			keepType(&s.early, v)
			s.earlyOK = true
		}
	}
	s.valueDone()
}

// keep sets *dst to b, reusing *dst when equal: a stream's versions repeat, and this keeps the
// steady state free of allocation for them.
func keep(dst *string, b []byte) {
	if *dst != string(b) {
		*dst = string(b)
	}
}

// keepType sets *dst to the type URL b, interned as Peeker.readString interns it.
func keepType(dst *string, b []byte) {
	if t, ok := knownTypeURLs[string(b)]; ok {
		*dst = t
		return
	}
	keep(dst, b)
}

// present returns b, or an empty slice that is not nil when b is nil: visit is passed nil only
// for an absent field, and a present empty one as empty.
func present(b []byte) []byte {
	if b == nil {
		return noBytes
	}
	return b
}

var noBytes = []byte{}

// valueDone returns to reading keys once a value has been read.
func (s *ResponseScanner) valueDone() {
	s.mode = modeKey
	if s.group == 0 {
		s.frames[s.depth].field = 0
	}
}

// pop closes the frame that has just ended; the field holding it in its parent is then done.
func (s *ResponseScanner) pop() {
	if s.frames[s.depth].kind == frameResource && s.visit != nil {
		var name, version []byte
		if s.hasName {
			name = present(s.name)
		}
		if s.hasVersion {
			version = present(s.version)
		}
		s.visit(Updated, name, version)
	}
	s.depth--
	s.valueDone()
}

// bad handles malformed data. Inside a resource's Any (read for a hint only, and not read at
// by protobuf's decoding of the response) it abandons the Any and skips to its end; elsewhere it
// fails the message with the error Peeker's request parser would give, wrapped the same way.
func (s *ResponseScanner) bad(err error) {
	if s.frames[s.depth].kind == frameAny {
		left := s.frames[s.depth].end - s.pos
		s.depth--
		s.v, s.vn, s.group = 0, 0, 0
		s.skip(left)
		return
	}
	top := s.frames[0].field
	if s.depth == 0 {
		if top == 0 {
			s.err = fmt.Errorf("%s: %w", s.msgName(), err)
		} else {
			s.err = fmt.Errorf("%s field %d: %w", s.msgName(), top, err)
		}
		return
	}
	if f := s.frames[1].field; f == 0 {
		err = fmt.Errorf("Resource: %w", err)
	} else {
		err = fmt.Errorf("Resource field %d: %w", f, err)
	}
	s.err = fmt.Errorf("%s field %d: %w", s.msgName(), top, err)
}

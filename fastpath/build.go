package fastpath

import (
	"fmt"
	"iter"

	"google.golang.org/grpc/mem"
)

// Status is the error_detail of a NACK (a google.rpc.Status).
type Status struct {
	Code    int32
	Message string
}

func appendVarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendKey(dst []byte, field, wt int) []byte {
	return appendVarint(dst, uint64(field)<<3|uint64(wt))
}

func appendBytesField(dst []byte, field int, b []byte) []byte {
	dst = appendKey(dst, field, wireBytes)
	dst = appendVarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStringField(dst []byte, field int, s string) []byte {
	if s == "" {
		return dst
	}
	dst = appendKey(dst, field, wireBytes)
	dst = appendVarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendStatus(dst []byte, field int, st *Status) []byte {
	var body []byte
	if st.Code != 0 {
		body = appendKey(body, statusCode, wireVarint)
		body = appendVarint(body, uint64(int64(st.Code)))
	}
	body = appendStringField(body, statusMessage, st.Message)
	return appendBytesField(dst, field, body)
}

// AppendRequest appends an encoded DiscoveryRequest. node is an encoded config.core.v3.Node or
// nil; nack, when not nil, becomes error_detail.
func AppendRequest(dst []byte, typeURL, version, nonce string, node []byte, names []string, nack *Status) []byte {
	dst = appendStringField(dst, reqVersion, version)
	if node != nil {
		dst = appendBytesField(dst, reqNode, node)
	}
	for _, n := range names {
		dst = appendKey(dst, reqNames, wireBytes)
		dst = appendVarint(dst, uint64(len(n)))
		dst = append(dst, n...)
	}
	dst = appendStringField(dst, reqTypeURL, typeURL)
	dst = appendStringField(dst, reqNonce, nonce)
	if nack != nil {
		dst = appendStatus(dst, reqError, nack)
	}
	return dst
}

// AppendDeltaRequest appends an encoded DeltaDiscoveryRequest. initial, when not nil, yields the
// initial_resource_versions entries.
func AppendDeltaRequest(dst []byte, typeURL, nonce string, node []byte, subscribe []string, initial iter.Seq2[string, []byte], nack *Status) []byte {
	if node != nil {
		dst = appendBytesField(dst, dreqNode, node)
	}
	dst = appendStringField(dst, dreqTypeURL, typeURL)
	for _, n := range subscribe {
		dst = appendKey(dst, dreqSubscribe, wireBytes)
		dst = appendVarint(dst, uint64(len(n)))
		dst = append(dst, n...)
	}
	if initial != nil {
		for name, version := range initial {
			dst = appendKey(dst, dreqInitial, wireBytes)
			entryLen := 1 + varintLen(uint64(len(name))) + len(name) + 1 + varintLen(uint64(len(version))) + len(version)
			dst = appendVarint(dst, uint64(entryLen))
			dst = appendKey(dst, 1, wireBytes)
			dst = appendVarint(dst, uint64(len(name)))
			dst = append(dst, name...)
			dst = appendKey(dst, 2, wireBytes)
			dst = appendVarint(dst, uint64(len(version)))
			dst = append(dst, version...)
		}
	}
	dst = appendStringField(dst, dreqNonce, nonce)
	if nack != nil {
		dst = appendStatus(dst, dreqError, nack)
	}
	return dst
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendWithout appends the fields of the message in data, unchanged and in order, except those
// for which drop returns true, and except deprecated groups, which xDS never uses. It is how the proxy strips a nonce or a node from a stored request.
func (p *Peeker) AppendWithout(dst []byte, data mem.BufferSlice, drop func(field int) bool) ([]byte, error) {
	c := NewCursor(data)
	for {
		f, wt, done, err := c.Next()
		if err != nil {
			return dst, err
		}
		if done {
			return dst, nil
		}
		if drop(f) || wt == wireStart { // groups (never used by xDS) are dropped too
			if err := c.SkipValue(wt); err != nil {
				return dst, err
			}
			continue
		}
		var b []byte
		switch wt {
		case wireVarint:
			v, err := c.Varint()
			if err != nil {
				return dst, err
			}
			dst = appendKey(dst, f, wt)
			dst = appendVarint(dst, v)
			continue
		case wireFixed64:
			b, err = c.Bytes(8, &p.scratch)
		case wireFixed32:
			b, err = c.Bytes(4, &p.scratch)
		case wireBytes:
			var n int
			if n, err = c.Length(); err == nil {
				b, err = c.Bytes(n, &p.scratch)
				if err == nil {
					dst = appendKey(dst, f, wt)
					dst = appendVarint(dst, uint64(n))
					dst = append(dst, b...)
				}
			}
			if err != nil {
				return dst, err
			}
			continue
		default:
			return dst, fmt.Errorf("fastpath: cannot copy field %d of wire type %d", f, wt)
		}
		if err != nil {
			return dst, err
		}
		dst = appendKey(dst, f, wt)
		dst = append(dst, b...)
	}
}

// ResourceBodies returns a copy of the Any.value of every resource in a DiscoveryResponse (delta
// false) or DeltaDiscoveryResponse (delta true). Only the agent's own types, consumed by the
// agent rather than forwarded, are read this way.
func (p *Peeker) ResourceBodies(data mem.BufferSlice, delta bool) ([][]byte, error) {
	var out [][]byte
	c := NewCursor(data)
	for {
		f, wt, done, err := c.Next()
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
		if f != respResource || wt != wireBytes { // field 2 in both response kinds
			if err := c.SkipValue(wt); err != nil {
				return nil, err
			}
			continue
		}
		n, err := c.Length()
		if err != nil {
			return nil, err
		}
		sub, err := c.Sub(n)
		if err != nil {
			return nil, err
		}
		if delta { // Resource.resource holds the Any
			var found bool
			if sub, found, err = p.field(sub, resResource); err != nil {
				return nil, err
			} else if !found {
				continue
			}
		}
		val, found, err := p.field(sub, anyValue)
		if err != nil {
			return nil, err
		}
		body := []byte{}
		if found {
			body = make([]byte, val.Len())
			s := body
			if b, err := val.Bytes(len(body), &s); err != nil {
				return nil, err
			} else {
				copy(body, b)
			}
		}
		out = append(out, body)
	}
}

// field returns a cursor over the last occurrence of bytes field want in the message in c.
func (p *Peeker) field(c Cursor, want int) (Cursor, bool, error) {
	var out Cursor
	found := false
	for {
		f, wt, done, err := c.Next()
		if err != nil {
			return Cursor{}, false, err
		}
		if done {
			return out, found, nil
		}
		if f == want && wt == wireBytes {
			n, err := c.Length()
			if err != nil {
				return Cursor{}, false, err
			}
			if out, err = c.Sub(n); err != nil {
				return Cursor{}, false, err
			}
			found = true
			continue
		}
		if err := c.SkipValue(wt); err != nil {
			return Cursor{}, false, err
		}
	}
}

// AppendNode appends an encoded node as field number field (2 in DiscoveryRequest, 1 in
// DeltaDiscoveryRequest).
func AppendNode(dst []byte, field int, node []byte) []byte {
	return appendBytesField(dst, field, node)
}

// Field numbers of the node in requests, for AppendNode.
const (
	RequestNodeField       = reqNode
	DeltaRequestNodeField  = dreqNode
	RequestNonceField      = reqNonce
	DeltaRequestNonceField = dreqNonce
)

// WithNode returns f with node (an encoded config.core.v3.Node) added as field number field (see
// AppendNode) when the message in f carries no such field; otherwise f unchanged. When it adds
// the node, f is freed and the returned frame holds a new copy.
func (p *Peeker) WithNode(f Frame, field int, node []byte) (Frame, error) {
	if hasField(f.Data, field) {
		return f, nil
	}
	b := AppendNode(nil, field, node)
	b, err := p.AppendWithout(b, f.Data, func(int) bool { return false })
	f.Free()
	if err != nil {
		return Frame{}, err
	}
	return FrameOf(b), nil
}

// hasField reports whether the message in data has a top-level field number field before the
// end or the first malformed field.
func hasField(data mem.BufferSlice, field int) bool {
	c := NewCursor(data)
	for {
		n, wt, done, err := c.Next()
		if err != nil || done {
			return false
		}
		if n == field {
			return true
		}
		if c.SkipValue(wt) != nil {
			return false
		}
	}
}

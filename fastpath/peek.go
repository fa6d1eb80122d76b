package fastpath

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
)

// maxPeekString bounds the strings the proxy copies out of a message (type URLs, nonces,
// versions, node ids, error messages). Longer values are a protocol violation.
const maxPeekString = 64 << 10

// Field numbers of envoy.service.discovery.v3 messages.
const (
	reqVersion   = 1 // DiscoveryRequest.version_info
	reqNode      = 2
	reqNames     = 3
	reqTypeURL   = 4
	reqNonce     = 5
	reqError     = 6
	respVersion  = 1 // DiscoveryResponse.version_info
	respResource = 2
	respTypeURL  = 4
	respNonce    = 5

	dreqNode        = 1 // DeltaDiscoveryRequest.node
	dreqTypeURL     = 2
	dreqSubscribe   = 3
	dreqUnsubscribe = 4
	dreqInitial     = 5
	dreqNonce       = 6
	dreqError       = 7
	drespVersion    = 1 // DeltaDiscoveryResponse.system_version_info
	drespResources  = 2
	drespTypeURL    = 4
	drespNonce      = 5
	drespRemoved    = 6
	resVersion      = 1 // Resource.version
	resResource     = 2
	resName         = 3
	anyTypeURL      = 1 // google.protobuf.Any.type_url
	anyValue        = 2 // google.protobuf.Any.value
	nodeID          = 1 // config.core.v3.Node.id
	statusCode      = 1 // google.rpc.Status.code
	statusMessage   = 2
)

// Request is what the proxy reads of a state-of-the-world DiscoveryRequest.
type Request struct {
	TypeURL  string
	Version  string
	Nonce    string
	Names    int    // number of resource names
	HasError bool   // error_detail is set: the request is a NACK
	ErrorMsg string // error_detail.message, when HasError
	NodeID   string // node.id, when the request carries a node
	Node     []byte // the encoded node, copied, when the request carries one
}

// DeltaRequest is what the proxy reads of a DeltaDiscoveryRequest.
type DeltaRequest struct {
	TypeURL     string
	Nonce       string
	Subscribe   int // number of names in resource_names_subscribe
	Unsubscribe int // number of names in resource_names_unsubscribe
	HasError    bool
	ErrorMsg    string
	NodeID      string
	Node        []byte
}

// Response is what the proxy reads of a state-of-the-world DiscoveryResponse.
type Response struct {
	TypeURL   string
	Version   string
	Nonce     string
	Resources int
}

// DeltaResponse is what the proxy reads of a DeltaDiscoveryResponse.
type DeltaResponse struct {
	TypeURL   string
	Version   string // system_version_info
	Nonce     string
	Resources int
	Removed   int
}

// NameKind says which list a name visited by [PeekDeltaRequest] or [PeekDeltaResponse] is in.
type NameKind uint8

const (
	Subscribe   NameKind = iota + 1 // DeltaDiscoveryRequest.resource_names_subscribe
	Unsubscribe                     // DeltaDiscoveryRequest.resource_names_unsubscribe
	Updated                         // a Resource in DeltaDiscoveryResponse.resources (with its version)
	Removed                         // DeltaDiscoveryResponse.removed_resources
)

// Peeker reads fields from frames. It keeps scratch space between calls so that names spanning
// buffer boundaries cost no allocation in steady state. Requests are read here with a [Cursor];
// responses by the [ResponseScanner] it holds. A Peeker is not safe for concurrent use;
// the zero value is ready to use.
type Peeker struct {
	scratch  []byte
	scratch2 []byte
	resp     ResponseScanner // responses, whole or streamed, have this one parser
}

// readString reads a length-delimited string field value, interning well-known type URLs.
func (p *Peeker) readString(c *Cursor, intern bool) (string, error) {
	n, err := c.Length()
	if err != nil {
		return "", err
	}
	if n > maxPeekString {
		return "", fmt.Errorf("fastpath: string field of %d bytes exceeds %d", n, maxPeekString)
	}
	b, err := c.Bytes(n, &p.scratch)
	if err != nil {
		return "", err
	}
	if intern {
		if s, ok := knownTypeURLs[string(b)]; ok {
			return s, nil
		}
	}
	return string(b), nil
}

// readNode copies one occurrence of the node field after node, the earlier occurrences, and
// reads its id. Protobuf merges repeated occurrences of a message field: the concatenated
// encodings decode as that merge, and a later id overrides an earlier one, so id is kept when
// this occurrence has none. Envoy sends the node once; the merge keeps the proxy's view (the
// replayed node, the logged id) equal to what Istiod decodes.
func (p *Peeker) readNode(c *Cursor, id string, node []byte) (string, []byte, error) {
	n, err := c.Length()
	if err != nil {
		return "", nil, err
	}
	sub, err := c.Sub(n)
	if err != nil {
		return "", nil, err
	}
	start := len(node)
	node = slices.Grow(node, n)[:start+n]
	if node == nil {
		node = []byte{} // present though empty: the request carries a node
	}
	dst := node[start:]
	cp := sub
	b, err := cp.Bytes(n, &dst)
	if err != nil {
		return "", nil, err
	}
	copy(node[start:], b) // a no-op when Bytes already copied into node

	nc := BytesCursor(node[start:])
	for {
		f, wt, done, err := nc.Next()
		if err != nil {
			return "", nil, fmt.Errorf("node: %w", err)
		}
		if done {
			return id, node, nil
		}
		if f == nodeID && wt == wireBytes {
			if id, err = p.readString(&nc, false); err != nil {
				return "", nil, fmt.Errorf("node.id: %w", err)
			}
			continue
		}
		if err := nc.SkipValue(wt); err != nil {
			return "", nil, fmt.Errorf("node: %w", err)
		}
	}
}

// readStatus reads a google.rpc.Status and returns its message, or msg (an earlier
// occurrence's, merged as protobuf does) when it has none.
func (p *Peeker) readStatus(c *Cursor, msg string) (string, error) {
	n, err := c.Length()
	if err != nil {
		return "", err
	}
	sub, err := c.Sub(n)
	if err != nil {
		return "", err
	}
	for {
		f, wt, done, err := sub.Next()
		if err != nil {
			return "", err
		}
		if done {
			return msg, nil
		}
		if f == statusMessage && wt == wireBytes {
			if msg, err = p.readString(&sub, false); err != nil {
				return "", err
			}
			continue
		}
		if err := sub.SkipValue(wt); err != nil {
			return "", err
		}
	}
}

// PeekRequest reads a DiscoveryRequest.
func (p *Peeker) PeekRequest(data mem.BufferSlice, r *Request) error {
	return p.PeekRequestNames(data, r, nil)
}

// PeekRequestNames reads a DiscoveryRequest like [Peeker.PeekRequest] and, when visit is not
// nil, calls it with every resource name in order; the name is only valid during the call.
func (p *Peeker) PeekRequestNames(data mem.BufferSlice, r *Request, visit func(name []byte)) error {
	*r = Request{}
	c := NewCursor(data)
	for {
		f, done, err := c.nextBytesField()
		if err != nil || done {
			return fieldError("DiscoveryRequest", f, err)
		}
		switch f {
		case reqVersion:
			r.Version, err = p.readString(&c, false)
		case reqTypeURL:
			r.TypeURL, err = p.readString(&c, true)
		case reqNonce:
			r.Nonce, err = p.readString(&c, false)
		case reqNames:
			r.Names++
			if visit == nil {
				err = c.SkipValue(wireBytes)
				break
			}
			var name []byte
			if name, err = p.readName(&c); err == nil {
				visit(name)
			}
		case reqNode:
			r.NodeID, r.Node, err = p.readNode(&c, r.NodeID, r.Node)
		case reqError:
			r.HasError = true
			r.ErrorMsg, err = p.readStatus(&c, r.ErrorMsg)
		default:
			err = c.SkipValue(wireBytes)
		}
		if err != nil {
			return fieldError("DiscoveryRequest", f, err)
		}
	}
}

// nextBytesField moves to the next length-delimited field and returns its number, skipping
// fields of other wire types (every field the proxy reads is length-delimited; others are
// unknown). An error while skipping comes with that field's number, one reading a key with 0.
func (c *Cursor) nextBytesField() (field int, done bool, err error) {
	for {
		f, wt, done, err := c.Next()
		if err != nil || done || wt == wireBytes {
			return f, done, err
		}
		if err := c.SkipValue(wt); err != nil {
			return f, false, err
		}
	}
}

// fieldError wraps err (nil: nil) with the message's name and, when not 0, the field's number.
func fieldError(msg string, field int, err error) error {
	switch {
	case err == nil:
		return nil
	case field == 0:
		return fmt.Errorf("%s: %w", msg, err)
	}
	return fmt.Errorf("%s field %d: %w", msg, field, err)
}

// readName reads a length-delimited value in place, or into the Peeker's scratch when it spans
// buffers; it is valid until the next read.
func (p *Peeker) readName(c *Cursor) ([]byte, error) {
	n, err := c.Length()
	if err != nil {
		return nil, err
	}
	return c.Bytes(n, &p.scratch)
}

// PeekResponse reads a DiscoveryResponse: a [ResponseScanner] fed the whole message, so that
// whole and streamed responses have one parser. It walks the top-level fields only: each
// resource is skipped by its length, so the cost does not depend on what the resources hold and
// nothing is allocated per resource.
func (p *Peeker) PeekResponse(data mem.BufferSlice, r *Response) error {
	p.feedWhole(false, data, nil)
	return p.resp.FinishSotW(r)
}

// feedWhole resets the Peeker's scanner for data and feeds it every buffer of data.
func (p *Peeker) feedWhole(delta bool, data mem.BufferSlice, visit func(NameKind, []byte, []byte)) {
	p.resp.Reset(delta, data.Len(), visit)
	for _, b := range data {
		if p.resp.Feed(b.ReadOnlyData()) != nil {
			return // sticky: Finish returns it
		}
	}
}

// PeekDeltaRequest reads a DeltaDiscoveryRequest. When visit is not nil it is called for every
// subscribed and unsubscribed name; the name is only valid during the call.
func (p *Peeker) PeekDeltaRequest(data mem.BufferSlice, r *DeltaRequest, visit func(NameKind, []byte)) error {
	*r = DeltaRequest{}
	c := NewCursor(data)
	for {
		f, done, err := c.nextBytesField()
		if err != nil || done {
			return fieldError("DeltaDiscoveryRequest", f, err)
		}
		switch f {
		case dreqNode:
			r.NodeID, r.Node, err = p.readNode(&c, r.NodeID, r.Node)
		case dreqTypeURL:
			r.TypeURL, err = p.readString(&c, true)
		case dreqNonce:
			r.Nonce, err = p.readString(&c, false)
		case dreqSubscribe, dreqUnsubscribe:
			kind := Subscribe
			if f == dreqUnsubscribe {
				kind = Unsubscribe
				r.Unsubscribe++
			} else {
				r.Subscribe++
			}
			var name []byte
			if name, err = p.readName(&c); err == nil && visit != nil {
				visit(kind, name)
			}
		case dreqError:
			r.HasError = true
			r.ErrorMsg, err = p.readStatus(&c, r.ErrorMsg)
		default:
			err = c.SkipValue(wireBytes)
		}
		if err != nil {
			return fieldError("DeltaDiscoveryRequest", f, err)
		}
	}
}

// PeekDeltaResponse reads a DeltaDiscoveryResponse, as [Peeker.PeekResponse] reads a
// DiscoveryResponse. When visit is not nil it is called with the name and version of every
// resource (kind Updated, at the resource's end) and every removed name (kind Removed); the
// slices are only valid during the call. Resource bodies are skipped unread.
func (p *Peeker) PeekDeltaResponse(data mem.BufferSlice, r *DeltaResponse, visit func(kind NameKind, name, version []byte)) error {
	p.feedWhole(true, data, visit)
	return p.resp.FinishDelta(r)
}

// CheckUTF8 reports the first string field read into r that is not valid UTF-8: proto.Unmarshal
// refuses such a message. The proxy forwards requests without this check (Istiod decodes them);
// a server of its own, such as SDS, applies it to answer as a generated server would.
func (r *Request) CheckUTF8() error {
	for _, f := range [...]struct {
		name, v string
	}{{"type_url", r.TypeURL}, {"version_info", r.Version}, {"response_nonce", r.Nonce},
		{"node.id", r.NodeID}, {"error_detail.message", r.ErrorMsg}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("DiscoveryRequest %s: %w", f.name, ErrInvalidUTF8)
		}
	}
	return nil
}

// ErrInvalidUTF8 reports a string field that is not valid UTF-8.
var ErrInvalidUTF8 = errors.New("string field is not valid UTF-8")

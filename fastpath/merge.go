package fastpath

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/mem"
)

// Field numbers used only by the merge.
const (
	drespRemovedNames = 8 // DeltaDiscoveryResponse.removed_resource_names (ResourceName)
	resResourceName   = 8 // Resource.resource_name (ResourceName)
	resNameName       = 1 // ResourceName.name
)

// ErrUnnamedResource is returned by [Peeker.MergeDeltaResponses] for a resource that carries no
// name: it cannot be matched against the other response, so the two cannot be merged.
var ErrUnnamedResource = errors.New("fastpath: delta resource without a name")

// MergeDeltaResponses appends to dst one DeltaDiscoveryResponse that a client applies with the
// same effect as applying older and then newer, both of the same type:
//
//   - every field of newer, unchanged and in order (its resources, removals, nonce, version,
//     type URL, control plane);
//   - before them, older's resources whose names newer neither updates nor removes;
//   - after them, older's removals of names newer does not mention (removals are kept).
//
// Resources are copied as wire bytes, never decoded: only their names are read. Older's other
// fields are superseded by newer's. The merged message is at most the two sizes added.
func (p *Peeker) MergeDeltaResponses(dst []byte, older, newer mem.BufferSlice) ([]byte, error) {
	names := map[string]struct{}{}
	err := p.walkDeltaNames(newer, func(_ int, name []byte, _ *Cursor, _ int) error {
		names[string(name)] = struct{}{}
		return nil
	})
	if err != nil {
		return dst, fmt.Errorf("newer response: %w", err)
	}
	// Size the result first, so a merged message holds no slack (it may wait long in a queue).
	kept := 0
	err = p.walkDeltaNames(older, func(_ int, name []byte, _ *Cursor, n int) error {
		if _, ok := names[string(name)]; !ok {
			kept += 1 + varintLen(uint64(n)) + n
		}
		return nil
	})
	if err != nil {
		return dst, fmt.Errorf("older response: %w", err)
	}
	dst = slices.Grow(dst, kept+newer.Len()) // newer re-encoded is never longer than it came
	// Older's surviving resources go first, its surviving removals last: a name is in at most
	// one of the three groups, so the order between groups changes nothing for the client.
	var removals []byte
	err = p.walkDeltaNames(older, func(field int, name []byte, raw *Cursor, n int) error {
		if _, ok := names[string(name)]; ok {
			return nil
		}
		b, err := raw.Bytes(n, &p.scratch2)
		if err != nil {
			return err
		}
		if field == drespResources {
			dst = appendBytesField(dst, field, b)
		} else {
			removals = appendBytesField(removals, field, b) // names only: small
		}
		return nil
	})
	if err != nil {
		return dst, fmt.Errorf("older response: %w", err)
	}
	if dst, err = p.AppendWithout(dst, newer, func(int) bool { return false }); err != nil {
		return dst, fmt.Errorf("newer response: %w", err)
	}
	return append(dst, removals...), nil
}

// walkDeltaNames calls visit for every resource (field 2), removed name (6) and removed
// ResourceName (8) of a DeltaDiscoveryResponse, with its name and a cursor at the start of its
// n value bytes. name is valid only during the call.
func (p *Peeker) walkDeltaNames(data mem.BufferSlice, visit func(field int, name []byte, raw *Cursor, n int) error) error {
	c := NewCursor(data)
	for {
		f, wt, done, err := c.Next()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if wt != wireBytes || (f != drespResources && f != drespRemoved && f != drespRemovedNames) {
			if err := c.SkipValue(wt); err != nil {
				return fmt.Errorf("field %d: %w", f, err)
			}
			continue
		}
		n, err := c.Length()
		if err != nil {
			return fmt.Errorf("field %d: %w", f, err)
		}
		raw := c
		sub, err := c.Sub(n)
		if err != nil {
			return fmt.Errorf("field %d: %w", f, err)
		}
		var name []byte
		switch f {
		case drespRemoved:
			name, err = sub.Bytes(n, &p.scratch)
		case drespRemovedNames:
			name, err = p.lastBytes(sub, resNameName)
		default:
			name, err = p.resourceKey(sub)
			if err == nil && len(name) == 0 {
				err = ErrUnnamedResource
			}
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", f, err)
		}
		if err := visit(f, name, &raw, n); err != nil {
			return err
		}
	}
}

// resourceKey is a Resource's name: its name field, or else its resource_name's name.
func (p *Peeker) resourceKey(c Cursor) ([]byte, error) {
	name, err := p.lastBytes(c, resName)
	if err != nil || len(name) > 0 {
		return name, err
	}
	rn, found, err := p.field(c, resResourceName)
	if err != nil || !found {
		return nil, err
	}
	return p.lastBytes(rn, resNameName)
}

// lastBytes returns the last occurrence of bytes field want in the message in c (nil if none),
// as protobuf's last-one-wins rule reads it. The result may live in p.scratch.
func (p *Peeker) lastBytes(c Cursor, want int) ([]byte, error) {
	sub, found, err := p.field(c, want)
	if err != nil || !found {
		return nil, err
	}
	return sub.Bytes(sub.Len(), &p.scratch)
}

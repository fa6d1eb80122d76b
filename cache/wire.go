package cache

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wingman-mesh/wingman/fastpath"
)

var errMalformed = errors.New("malformed protobuf")

// eachField calls fn with the value of every length-delimited occurrence of field in msg,
// checking that the whole message parses.
func eachField(msg []byte, field protowire.Number, fn func(v []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if num == field && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return errMalformed
			}
			if err := fn(v); err != nil {
				return err
			}
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return errMalformed
		}
		msg = msg[m:]
	}
	return nil
}

// eachAnyField calls fn with every length-delimited field of msg (last one wins for singular
// fields, as protobuf merges).
func eachAnyField(msg []byte, fn func(f protowire.Number, v []byte)) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return errMalformed
			}
			fn(num, v)
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return errMalformed
		}
		msg = msg[m:]
	}
	return nil
}

// anyParts returns an Any's type URL and value.
func anyParts(a []byte) (typeURL string, value []byte, err error) {
	err = eachAnyField(a, func(f protowire.Number, v []byte) {
		switch f {
		case anyType:
			typeURL = string(v)
		case anyValue:
			value = v
		}
	})
	return typeURL, value, err
}

// rebuild appends msg to dst, with each occurrence of field written by fn (which appends the
// new length-prefixed value); every other field is copied byte for byte.
func rebuild(dst, msg []byte, field protowire.Number, fn func(dst, v []byte) ([]byte, error)) ([]byte, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, errMalformed
		}
		if num == field && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg[n:])
			if m < 0 {
				return nil, errMalformed
			}
			dst = protowire.AppendTag(dst, num, typ)
			var err error
			if dst, err = fn(dst, v); err != nil {
				return nil, err
			}
			msg = msg[n+m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return nil, errMalformed
		}
		dst = append(dst, msg[:n+m]...)
		msg = msg[n+m:]
	}
	return dst, nil
}

// appendAny appends an Any's fields.
func appendAny(dst []byte, typeURL string, value []byte) []byte {
	dst = protowire.AppendTag(dst, anyType, protowire.BytesType)
	dst = protowire.AppendString(dst, typeURL)
	dst = protowire.AppendTag(dst, anyValue, protowire.BytesType)
	return protowire.AppendBytes(dst, value)
}

// typedExtensionConfig encodes Any{TypedExtensionConfig{name, typed_config: Any{typeURL, value}}}.
func typedExtensionConfig(name, typeURL string, value []byte) []byte {
	tec := protowire.AppendTag(nil, tecName, protowire.BytesType)
	tec = protowire.AppendString(tec, name)
	tec = protowire.AppendTag(tec, tecTyped, protowire.BytesType)
	tec = protowire.AppendBytes(tec, appendAny(nil, typeURL, value))
	return appendAny(nil, fastpath.ExtensionConfigType, tec)
}

// merged returns the concatenated values of every length-delimited occurrence of field:
// parsing the concatenation is what protobuf does with a repeated singular message (merge).
func merged(msg []byte, field protowire.Number) ([]byte, bool, error) {
	var out []byte
	n := 0
	err := eachField(msg, field, func(v []byte) error {
		if n == 0 {
			out = v // no copy for the common single occurrence
		} else {
			out = append(append([]byte(nil), out...), v...)
		}
		n++
		return nil
	})
	return out, n > 0, err
}

// lastString returns the last occurrence of a string field (protobuf: last one wins).
func lastString(msg []byte, field protowire.Number) (string, error) {
	var s []byte
	err := eachField(msg, field, func(v []byte) error { s = v; return nil })
	return string(s), err
}

// lastVarint returns the last occurrence of a varint field.
func lastVarint(msg []byte, field protowire.Number) (uint64, bool, error) {
	var out uint64
	found := false
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return 0, false, errMalformed
		}
		msg = msg[n:]
		if num == field && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(msg)
			if m < 0 {
				return 0, false, errMalformed
			}
			out, found = v, true
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return 0, false, errMalformed
		}
		msg = msg[m:]
	}
	return out, found, nil
}

// oneofCase returns which of two message fields of a oneof is set (the last one seen wins, as
// protobuf parsing does) and its merged value; 0 when neither is.
func oneofCase(msg []byte, a, b protowire.Number) (protowire.Number, []byte, error) {
	var kind protowire.Number
	var val []byte
	err := eachAnyField(msg, func(f protowire.Number, v []byte) {
		if f != a && f != b {
			return
		}
		if f != kind {
			kind, val = f, nil
		}
		if val == nil {
			val = v
		} else {
			val = append(append([]byte(nil), val...), v...)
		}
	})
	return kind, val, err
}

// replaceField appends msg to dst with every occurrence of field removed and, when keep, val
// written once in place of the first occurrence (at the end if there was none). Other fields
// are copied byte for byte. msg must have parsed already.
func replaceField(dst, msg []byte, field protowire.Number, val []byte, keep bool) []byte {
	written := false
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return append(dst, msg...)
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return append(dst, msg...)
		}
		if num == field && typ == protowire.BytesType {
			if keep && !written {
				dst = protowire.AppendTag(dst, field, protowire.BytesType)
				dst = protowire.AppendBytes(dst, val)
				written = true
			}
		} else {
			dst = append(dst, msg[:n+m]...)
		}
		msg = msg[n+m:]
	}
	if keep && !written {
		dst = protowire.AppendTag(dst, field, protowire.BytesType)
		dst = protowire.AppendBytes(dst, val)
	}
	return dst
}

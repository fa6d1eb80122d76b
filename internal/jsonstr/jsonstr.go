// Package jsonstr holds what the agent's hand-written JSON writers (bootstrap's and istiolog's,
// which write encoding/json's bytes, and meshapi's, which writes protojson's) escape alike inside
// a string.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendEscapedASCII appends the escape of ASCII byte c, one the caller has decided to escape:
// \" and \\, the short forms \b \f \n \r \t, and \u00XX (lower-case hex) for anything else, which is
// how both encoding/json and protojson write control characters (and encoding/json <, > and &).
func AppendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// AppendLineSeparator appends the escape of U+2028 (last == 0x8) or U+2029 (last == 0x9), which
// encoding/json escapes for the sake of JavaScript: last is the rune's lowest hex digit.
func AppendLineSeparator(b []byte, last byte) []byte {
	return append(b, '\\', 'u', '2', '0', '2', hexDigits[last&0xf])
}

// AppendString appends s quoted as encoding/json writes a string: ", \ and control characters
// escaped (AppendEscapedASCII), U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd, and, when
// escapeHTML is set (encoding/json's default; off under Encoder.SetEscapeHTML(false)), <, > and &
// as \u003c \u003e \u0026.
func AppendString(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = AppendEscapedASCII(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = AppendLineSeparator(b, byte(r&0xf))
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

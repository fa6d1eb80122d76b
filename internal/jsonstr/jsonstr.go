// Package jsonstr holds what the agent's two hand-written JSON writers (bootstrap's, which writes
// encoding/json's bytes, and meshapi's, which writes protojson's) escape alike inside a string.
package jsonstr

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

package meshgen

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// goCamel turns a protobuf name into the Go identifier protoc-gen-go gives it, so that a bootstrap
// template written against Istio's generated types reads the same field names from ours. The rule
// (learnt from protoc-gen-go's output, checked name by name against istio.io/api's Go types by
// TestShapesMatchIstio): words start at a letter after '_', '.', a digit or the start and are
// capitalised; '_' before a lower-case letter is dropped; a leading '_' (or one after '.') becomes
// 'X'; '.' becomes '_' unless a lower-case letter follows, when it is dropped.
func goCamel(s string) string {
	var b strings.Builder
	wordStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch {
		case c == '.':
			if !isLower(next) {
				b.WriteByte('_')
			}
			wordStart = true
		case c == '_' && (i == 0 || s[i-1] == '.'):
			b.WriteByte('X')
			wordStart = true
		case c == '_':
			if !isLower(next) {
				b.WriteByte('_')
			}
			wordStart = true
		case c >= '0' && c <= '9':
			b.WriteByte(c)
			wordStart = true
		case isLower(c) && wordStart:
			b.WriteByte(c - 'a' + 'A')
			wordStart = false
		case isLower(c):
			b.WriteByte(c)
		default:
			b.WriteByte(c)
			wordStart = false
		}
	}
	return b.String()
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

// goTypeName is the Go name of a message or enum declared in proto package pkg: nested
// declarations are joined to their parents with '_' (Tracing.Zipkin is Tracing_Zipkin).
func goTypeName(d protoreflect.Descriptor) string {
	rel := strings.TrimPrefix(string(d.FullName()), string(d.ParentFile().Package())+".")
	return goCamel(rel)
}

// enumValuePrefix is what protoc-gen-go puts before an enum value's name: the enclosing
// message's Go name for a nested enum, the enum's own Go name for a top-level one.
func enumValuePrefix(ed protoreflect.EnumDescriptor) string {
	if md, ok := ed.Parent().(protoreflect.MessageDescriptor); ok {
		return goTypeName(md)
	}
	return goTypeName(ed)
}

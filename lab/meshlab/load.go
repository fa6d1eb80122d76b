package meshlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// Audience says which clients a resource is served to, as Istiod picks a generator by the
// node's GENERATOR metadata: proxyless gRPC clients set GENERATOR=grpc, Envoy does not.
type Audience string

// The audiences. A document's optional "clients" field names one; without it the resource is
// served to both.
const (
	AllClients Audience = ""
	Envoy      Audience = "envoy"
	GRPC       Audience = "grpc"
)

// audiences are the caches a resource can land in.
var audiences = []Audience{Envoy, GRPC}

func (a Audience) includes(b Audience) bool { return a == AllClients || a == b }

// Resource is one decoded resource document.
type Resource struct {
	Kind    string // "Cluster", "NameTable", ...
	TypeURL string
	Name    string // "" for singletons (NameTable, ProxyConfig)
	Clients Audience
	File    string // the file it came from
	Doc     int    // 1-based document number within the file
	Msg     proto.Message
}

// FileError says which file, document and field a resource was rejected for.
type FileError struct {
	File  string
	Doc   int    // 1-based; 0 when the whole file is at fault
	Line  int    // 1-based line where the document starts; 0 when unknown
	Kind  string // the resource kind when known
	Field string // dotted path of the field at fault, e.g. "load_assignment.endpoints[0]"; "" when unknown
	Err   error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Doc > 0 {
		fmt.Fprintf(&b, ": document %d", e.Doc)
		if e.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", e.Line)
		}
	}
	if e.Kind != "" {
		b.WriteString(": " + e.Kind)
	}
	if e.Field != "" {
		b.WriteString(": field " + e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// Set is a complete set of resources: audience → type URL → name → message. Immutable once
// built.
type Set struct {
	byAud  map[Audience]map[string]map[string]proto.Message
	counts map[string]int // type URL → resources defined (one per document)
	files  int
}

// Resources returns what one audience is served of one type URL (callers must not modify the
// map).
func (s *Set) Resources(a Audience, typeURL string) map[string]proto.Message {
	return s.byAud[a][typeURL]
}

// Counts returns "Kind=n" for each kind present, in a fixed order, for logs.
func (s *Set) Counts() string {
	var parts []string
	for _, k := range kinds {
		if n := s.counts[k.typeURL]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k.name, n))
		}
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, " ")
}

// Files is how many resource files the set was read from.
func (s *Set) Files() int { return s.files }

// resourceFile says whether a directory entry is read as a resource file: .yaml, .yml or .json,
// not hidden (editors' swap and backup files start with a dot).
func resourceFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// LoadDir reads every resource file directly in dir (sub-directories are not read) into a Set.
// The first bad file, in name order, fails the whole load with a *FileError.
func LoadDir(dir string) (*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("meshlab: read resources dir: %w", err)
	}
	set := &Set{byAud: map[Audience]map[string]map[string]proto.Message{}, counts: map[string]int{}}
	where := map[string]string{} // audience, typeURL and name → file, for duplicate errors
	for _, e := range entries {
		if e.IsDir() || !resourceFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &FileError{File: path, Err: err}
		}
		res, err := ParseFile(path, data)
		if err != nil {
			return nil, err
		}
		set.files++
		for _, r := range res {
			if err := set.add(r, where); err != nil {
				return nil, err
			}
		}
	}
	return set, nil
}

// add puts r in the audiences it is for, refusing a name already taken there.
func (s *Set) add(r Resource, where map[string]string) error {
	for _, a := range audiences {
		if !r.Clients.includes(a) {
			continue
		}
		key := string(a) + "\x00" + r.TypeURL + "\x00" + r.Name
		if first, dup := where[key]; dup {
			what := fmt.Sprintf("%s %q", r.Kind, r.Name)
			if r.Name == "" {
				what = "a " + r.Kind + " (only one is allowed)"
			}
			return &FileError{File: r.File, Doc: r.Doc, Kind: r.Kind,
				Err: fmt.Errorf("%s for %s clients is already defined in %s", what, a, first)}
		}
		where[key] = fmt.Sprintf("%s document %d", r.File, r.Doc)
		byType := s.byAud[a]
		if byType == nil {
			byType = map[string]map[string]proto.Message{}
			s.byAud[a] = byType
		}
		m := byType[r.TypeURL]
		if m == nil {
			m = map[string]proto.Message{}
			byType[r.TypeURL] = m
		}
		m[r.Name] = r.Msg
	}
	s.counts[r.TypeURL]++
	return nil
}

// ParseFile decodes the YAML or JSON documents of one file (separated by "---" lines). Each
// document names its type with "kind" (Listener, RouteConfiguration, Cluster,
// ClusterLoadAssignment, Secret, ExtensionConfig, NameTable, ProxyConfig) or with "@type" (a
// type URL, as in an Any), and may say which clients it is for with "clients: envoy" or
// "clients: grpc" (default both); the other fields are the message in protojson form (proto or
// JSON field names). Unknown fields are errors. name is used in errors only.
func ParseFile(name string, data []byte) ([]Resource, error) {
	var out []Resource
	for i, d := range splitDocs(data) {
		r, err := parseDoc(name, i+1, d)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

type rawDoc struct {
	line int // 1-based line of the document's first line
	data []byte
}

// splitDocs splits YAML documents on "---" lines. A JSON file is one document.
func splitDocs(data []byte) []rawDoc {
	var docs []rawDoc
	start, startLine, line := 0, 1, 1
	for off := 0; off <= len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		var l []byte
		next := len(data) + 1
		if end >= 0 {
			l, next = data[off:off+end], off+end+1
		} else {
			l = data[off:]
		}
		if s := strings.TrimRight(string(l), " \t\r"); s == "---" || strings.HasPrefix(s, "--- ") {
			docs = append(docs, rawDoc{startLine, data[start:off]})
			start, startLine = min(next, len(data)), line+1
		}
		off = next
		line++
	}
	return append(docs, rawDoc{startLine, data[start:]})
}

// parseDoc decodes one document; an empty document (blank or comments only) gives nil.
func parseDoc(file string, n int, d rawDoc) (*Resource, error) {
	fail := func(k, field string, err error) error {
		return &FileError{File: file, Doc: n, Line: d.line, Kind: k, Field: field, Err: err}
	}
	js, err := yaml.YAMLToJSON(d.data)
	if err != nil {
		return nil, fail("", "", fmt.Errorf("not valid YAML or JSON: %w", err))
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // keeps 64-bit integers exact through the re-encoding below
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fail("", "", errors.New("the document is not a mapping of fields"))
	}
	k, err := docKind(obj)
	if err != nil {
		return nil, fail("", "", err)
	}
	aud, err := docAudience(obj)
	if err != nil {
		return nil, fail(k.name, "clients", err)
	}
	delete(obj, "kind")
	delete(obj, "@type")
	delete(obj, "clients")
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fail(k.name, "", err)
	}
	msg := k.newMsg()
	if err := protojson.Unmarshal(body, msg.Interface()); err != nil {
		field, ferr := locate(msg.Descriptor(), obj, "")
		if ferr == nil {
			ferr = cleanProtoErr(err)
		}
		return nil, fail(k.name, field, ferr)
	}
	r := &Resource{Kind: k.name, TypeURL: k.typeURL, Clients: aud, File: file, Doc: n, Msg: msg.Interface()}
	if k.nameField != "" {
		fd := msg.Descriptor().Fields().ByName(k.nameField)
		r.Name = msg.Get(fd).String()
		if r.Name == "" {
			return nil, fail(k.name, string(k.nameField), errors.New("missing or empty: every "+k.name+" needs a name"))
		}
	}
	return r, nil
}

// docKind reads the document's "kind" or "@type".
func docKind(obj map[string]any) (kind, error) {
	kv, hasKind := obj["kind"]
	tv, hasType := obj["@type"]
	switch {
	case hasKind && hasType:
		return kind{}, errors.New(`has both "kind" and "@type": give one`)
	case hasType:
		s, _ := tv.(string)
		k, ok := kindByTypeURL(s)
		if !ok {
			return kind{}, fmt.Errorf("field @type: %q is not a type meshlab serves (want one of the type URLs of %s)", s, strings.Join(kindNames(), ", "))
		}
		return k, nil
	case hasKind:
		s, _ := kv.(string)
		k, ok := kindByName(s)
		if !ok {
			names := kindNames()
			sort.Strings(names)
			return kind{}, fmt.Errorf("field kind: %q is not a kind meshlab serves (want one of %s)", s, strings.Join(names, ", "))
		}
		return k, nil
	}
	return kind{}, fmt.Errorf(`no "kind" or "@type" field (kind is one of %s)`, strings.Join(slices.Clone(kindNames()), ", "))
}

// docAudience reads the optional "clients" field.
func docAudience(obj map[string]any) (Audience, error) {
	v, ok := obj["clients"]
	if !ok {
		return AllClients, nil
	}
	switch s, _ := v.(string); Audience(s) {
	case Envoy, GRPC:
		return Audience(s), nil
	}
	return "", fmt.Errorf("%v: want %q or %q (or no clients field, for both)", v, Envoy, GRPC)
}

package metric

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Type is a metric family's Prometheus type.
type Type string

// The family types the agent uses.
const (
	TypeCounter   Type = "counter"
	TypeGauge     Type = "gauge"
	TypeHistogram Type = "histogram"
	TypeSummary   Type = "summary"
)

// Registry holds metric families. A Registry from WithPrefix shares its families with the one
// it came from and prepends its prefix to the names it registers.
type Registry struct {
	prefix string
	s      *state
}

type state struct {
	mu       sync.Mutex
	families map[string]*family // by full name
}

// family is one metric name: its help, type and series (by rendered constant labels), or a
// function that produces its samples at scrape time.
type family struct {
	name, help string
	typ        Type
	series     map[string]writer       // guarded by state.mu
	collect    func(emit func(Sample)) // scrape-time family; nil otherwise
}

// writer is one series: it appends its sample lines for family name and labels.
type writer interface {
	write(w *bufio.Writer, name, labels string)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{s: &state{families: map[string]*family{}}}
}

// WithPrefix returns a view of r that prepends prefix to every name it registers.
func (r *Registry) WithPrefix(prefix string) *Registry {
	if r == nil {
		return nil
	}
	return &Registry{prefix: r.prefix + prefix, s: r.s}
}

// series returns the series of name with the rendered labels, creating the family and the
// series with mk when absent. It panics when name is registered with another type.
func (r *Registry) series(name, help string, typ Type, labels string, mk func() writer) writer {
	if r == nil {
		return mk()
	}
	name = r.prefix + name
	checkName(name)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	f := r.s.families[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ, series: map[string]writer{}}
		r.s.families[name] = f
	} else if f.typ != typ || f.collect != nil {
		panic(fmt.Sprintf("metric: %s registered as %s, asked for as %s", name, f.typ, typ))
	}
	w := f.series[labels]
	if w == nil {
		w = mk()
		f.series[labels] = w
	}
	return w
}

// Sample is one value of a scrape-time family, with its label pairs (name, value, ...) and
// a suffix to the family's name ("_sum" and "_count" of a summary), usually none.
type Sample struct {
	Value  float64
	Labels []string
	Suffix string
}

// Func registers a family whose samples f produces at every scrape (gauges computed from
// state, runtime and process figures). Registering a name again replaces its function.
func (r *Registry) Func(name, help string, typ Type, f func(emit func(Sample))) {
	if r == nil {
		return
	}
	name = r.prefix + name
	checkName(name)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if old := r.s.families[name]; old != nil && old.collect == nil {
		panic(fmt.Sprintf("metric: %s already registered as a %s", name, old.typ))
	}
	r.s.families[name] = &family{name: name, help: help, typ: typ, collect: f}
}

// WriteText writes every family, sorted by name and its series by labels, in Prometheus' text
// format 0.0.4, as client_golang's registry did.
func (r *Registry) WriteText(w io.Writer) error {
	if r == nil {
		return nil
	}
	type snap struct {
		f      *family
		labels []string
		series []writer
	}
	r.s.mu.Lock()
	// Pointers: their sort instantiation is shared with the rest of the binary (a struct
	// element type would add ~12 KB of sorting code).
	snaps := make([]*snap, 0, len(r.s.families))
	for _, f := range r.s.families {
		s := &snap{f: f}
		for l := range f.series {
			s.labels = append(s.labels, l)
		}
		slices.Sort(s.labels)
		for _, l := range s.labels {
			s.series = append(s.series, f.series[l])
		}
		snaps = append(snaps, s)
	}
	r.s.mu.Unlock()
	slices.SortFunc(snaps, func(a, b *snap) int { return strings.Compare(a.f.name, b.f.name) })

	bw := bufio.NewWriterSize(w, 4096)
	for _, s := range snaps {
		if s.f.collect != nil {
			var samples []Sample
			s.f.collect(func(x Sample) { samples = append(samples, x) })
			if len(samples) == 0 {
				continue // as client_golang: a family without samples is not written
			}
			header(bw, s.f)
			for _, x := range samples {
				bw.WriteString(s.f.name)
				bw.WriteString(x.Suffix)
				bw.WriteString(renderLabels(x.Labels))
				bw.WriteByte(' ')
				writeFloat(bw, x.Value)
				bw.WriteByte('\n')
			}
			continue
		}
		if len(s.series) == 0 {
			continue
		}
		header(bw, s.f)
		for i, sw := range s.series {
			sw.write(bw, s.f.name, s.labels[i])
		}
	}
	return bw.Flush()
}

func header(w *bufio.Writer, f *family) {
	w.WriteString("# HELP ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(escapeHelp(f.help))
	w.WriteString("\n# TYPE ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(string(f.typ))
	w.WriteByte('\n')
}

// checkName panics on a name Prometheus would refuse: [a-zA-Z_:][a-zA-Z0-9_:]*.
func checkName(name string) {
	for i, c := range name {
		if c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		panic(fmt.Sprintf("metric: invalid metric name %q", name))
	}
	if name == "" {
		panic("metric: empty metric name")
	}
}

// Value reads one series of a counter, gauge or scrape-time family by its full name and label
// pairs (histograms report their count), for tests and debugging; ok is false when absent.
func (r *Registry) Value(name string, labels ...string) (v float64, ok bool) {
	if r == nil {
		return 0, false
	}
	want := renderLabels(labels)
	r.s.mu.Lock()
	f := r.s.families[name]
	var w writer
	if f != nil && f.collect == nil {
		w = f.series[want]
	}
	r.s.mu.Unlock()
	switch {
	case f == nil:
		return 0, false
	case f.collect != nil:
		f.collect(func(x Sample) {
			if x.Suffix == "" && renderLabels(x.Labels) == want {
				v, ok = x.Value, true
			}
		})
		return v, ok
	}
	switch s := w.(type) {
	case *Counter:
		return s.Value(), true
	case *Gauge:
		return s.Value(), true
	case *Histogram:
		return float64(s.Count()), true
	}
	return 0, false
}

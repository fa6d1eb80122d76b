package metric

import (
	"bufio"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// value is a float64 updated atomically.
type value struct{ bits atomic.Uint64 }

func (v *value) add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (v *value) load() float64 { return math.Float64frombits(v.bits.Load()) }

// Counter only goes up.
type Counter struct{ v value }

// Inc adds one.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative (a negative d is ignored).
func (c *Counter) Add(d float64) {
	if d > 0 {
		c.v.add(d)
	}
}

// Value is the counter's current value.
func (c *Counter) Value() float64 { return c.v.load() }

func (c *Counter) write(w *bufio.Writer, name, labels string) { sample(w, name, labels, c.v.load()) }

// Counter returns the counter name with constant label pairs (name, value, ...).
func (r *Registry) Counter(name, help string, labels ...string) *Counter {
	return r.series(name, help, TypeCounter, renderLabels(labels), func() writer { return new(Counter) }).(*Counter)
}

// Gauge goes up and down.
type Gauge struct{ v value }

// Set sets the gauge to x.
func (g *Gauge) Set(x float64) { g.v.bits.Store(math.Float64bits(x)) }

// Add adds d (negative to subtract).
func (g *Gauge) Add(d float64) { g.v.add(d) }

// Value is the gauge's current value.
func (g *Gauge) Value() float64 { return g.v.load() }

func (g *Gauge) write(w *bufio.Writer, name, labels string) { sample(w, name, labels, g.v.load()) }

// Gauge returns the gauge name with constant label pairs (name, value, ...).
func (r *Registry) Gauge(name, help string, labels ...string) *Gauge {
	return r.series(name, help, TypeGauge, renderLabels(labels), func() writer { return new(Gauge) }).(*Gauge)
}

// CounterVec is a counter family with one series per value of its labels.
type CounterVec struct {
	r          *Registry
	name, help string
	labels     []string
	mu         sync.Mutex
	local      map[string]*Counter // the series of an unregistered vector (nil Registry)
}

// CounterVec returns the counter family name whose series are told apart by labelNames.
func (r *Registry) CounterVec(name, help string, labelNames ...string) *CounterVec {
	for _, l := range labelNames {
		checkLabelName(l)
	}
	return &CounterVec{r: r, name: name, help: help, labels: slices.Clone(labelNames), local: map[string]*Counter{}}
}

// With returns the series for the label values, in the order of the label names.
func (v *CounterVec) With(values ...string) *Counter {
	if len(values) != len(v.labels) {
		panic("metric: " + v.name + ": want " + strconv.Itoa(len(v.labels)) + " label values")
	}
	pairs := make([]string, 0, 2*len(values))
	for i, val := range values {
		pairs = append(pairs, v.labels[i], val)
	}
	if v.r == nil {
		key := renderLabels(pairs)
		v.mu.Lock()
		defer v.mu.Unlock()
		c := v.local[key]
		if c == nil {
			c = new(Counter)
			v.local[key] = c
		}
		return c
	}
	return v.r.Counter(v.name, v.help, pairs...)
}

// Histogram counts observations in cumulative buckets, with their sum and count.
type Histogram struct {
	upper  []float64 // bucket upper bounds, ascending; +Inf implied
	counts []atomic.Uint64
	count  atomic.Uint64
	sum    value
}

// Observe records x.
func (h *Histogram) Observe(x float64) {
	i, _ := slices.BinarySearch(h.upper, x) // first bound >= x
	if i < len(h.counts) {
		h.counts[i].Add(1)
	}
	h.sum.add(x)
	h.count.Add(1)
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

func (h *Histogram) write(w *bufio.Writer, name, labels string) {
	// Read count first: buckets then hold at least as many as it says (observations in flight
	// may show in buckets but not yet in the count, never the reverse).
	total := h.count.Load()
	var cum uint64
	for i, ub := range h.upper {
		cum += h.counts[i].Load()
		sample(w, name+"_bucket", withLabel(labels, "le", strconv.FormatFloat(ub, 'g', -1, 64)), float64(cum))
	}
	sample(w, name+"_bucket", withLabel(labels, "le", "+Inf"), float64(max(total, cum)))
	sample(w, name+"_sum", labels, h.sum.load())
	sample(w, name+"_count", labels, float64(max(total, cum)))
}

// Histogram returns the histogram name with the given bucket upper bounds (ascending).
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *Histogram {
	upper := slices.Clone(buckets)
	slices.Sort(upper)
	return r.series(name, help, TypeHistogram, renderLabels(labels), func() writer {
		return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper))}
	}).(*Histogram)
}

func sample(w *bufio.Writer, name, labels string, v float64) {
	w.WriteString(name)
	w.WriteString(labels)
	w.WriteByte(' ')
	writeFloat(w, v)
	w.WriteByte('\n')
}

package istiolog

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"
)

// handler writes one scope's records.
type handler struct {
	out       *output
	scope     string // "" for the default scope
	isDefault bool
	min       slog.Level
	stack     Level // --log_stacktrace_level of the scope
	caller    bool
	attrs     []byte // With's attributes, encoded (text: " k=v k=v"; JSON: `,"k":v...`)
	prefix    string // WithGroup's groups, as a key prefix "g."
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	c := *h
	c.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		c.attrs = c.appendAttr(c.attrs, h.prefix, a)
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	t := r.Time
	if t.IsZero() {
		t = time.Now() // as Istio's emitWithTime
	}
	lv := of(r.Level)
	var stack []byte
	if h.dumpStack(lv) {
		stack = appendStack(nil, r.PC)
	}
	if h.out.json {
		b = h.appendJSON(b, t, lv, &r, stack)
	} else {
		b = h.appendText(b, t, lv, &r, stack)
	}
	h.out.write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		bufPool.Put(bp)
	}
	return nil
}

// dumpStack is Istio's rule (pkg/log/zapcore_handler.go at 1.30.3): the default scope writes a
// stack for records at or above its stack level; another scope writes one for every record once
// its stack level is error or finer (fatal records: fatal or finer).
func (h *handler) dumpStack(l Level) bool {
	thresh := l
	if !h.isDefault {
		thresh = Error
		if l == Fatal {
			thresh = Fatal
		}
	}
	return h.stack >= thresh
}

func (h *handler) appendText(b []byte, t time.Time, lv Level, r *slog.Record, stack []byte) []byte {
	b = appendTime(b, t)
	b = append(b, '\t')
	b = append(b, lv.recordName()...)
	if h.scope != "" {
		b = append(b, '\t')
		b = append(b, h.scope...)
	}
	if h.caller && r.PC != 0 {
		b = append(b, '\t')
		b = appendCaller(b, r.PC)
	}
	b = append(b, '\t')
	b = append(b, r.Message...)
	mark := len(b)
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		b = h.appendAttr(b, h.prefix, a)
		return true
	})
	if len(b) > mark {
		b[mark] = '\t' // the fields' leading space: a tab after the message
	}
	if stack != nil {
		b = append(b, '\n')
		b = append(b, stack...)
	}
	return append(b, '\n')
}

func (h *handler) appendJSON(b []byte, t time.Time, lv Level, r *slog.Record, stack []byte) []byte {
	b = append(b, `{"level":"`...)
	b = append(b, lv.recordName()...)
	b = append(b, `","time":"`...)
	b = appendTime(b, t)
	b = append(b, '"')
	if h.scope != "" {
		b = append(b, `,"scope":"`...)
		b = appendZapString(b, h.scope)
		b = append(b, '"')
	}
	if h.caller && r.PC != 0 {
		b = append(b, `,"caller":"`...)
		b = appendZapString(b, string(appendCaller(nil, r.PC)))
		b = append(b, '"')
	}
	b = append(b, `,"msg":"`...)
	b = appendZapString(b, r.Message)
	b = append(b, '"')
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		b = h.appendAttr(b, h.prefix, a)
		return true
	})
	if stack != nil {
		b = append(b, `,"stack":"`...)
		b = appendZapString(b, string(stack))
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// appendAttr appends one attribute (a group's members with its name as a key prefix): in text,
// " k=v"; in JSON, `,"k":v`.
func (h *handler) appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b // slog's rule: an empty attribute is ignored
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			b = h.appendAttr(b, prefix, m)
		}
		return b
	}
	if h.out.json {
		mark := len(b)
		b = append(b, ',', '"')
		b = appendZapString(b, prefix)
		b = appendZapString(b, a.Key)
		b = append(b, '"', ':')
		b, err := appendJSONValue(b, a.Value)
		if err != nil {
			// zapcore/field.go AddTo: the field is left out and "<key>Error" says why.
			b = append(b[:mark], ',', '"')
			b = appendZapString(b, prefix)
			b = appendZapString(b, a.Key)
			b = append(b, `Error":"`...)
			b = appendZapString(b, err.Error())
			b = append(b, '"')
		}
		return b
	}
	b = append(b, ' ')
	b = append(b, prefix...)
	b = append(b, a.Key...)
	b = append(b, '=')
	return appendTextValue(b, a.Value)
}

// appendCaller appends zap's short caller: the file's directory and name, and the line.
func appendCaller(b []byte, pc uintptr) []byte {
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return appendTrimmedPath(b, f.File, f.Line)
}

// appendStack appends the stack from the record's call site outwards, as zap formats it
// (internal/stacktrace: "function\n\tfile:line" per frame, the outermost frame left out).
func appendStack(b []byte, pc uintptr) []byte {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(1, pcs)
	for n == len(pcs) {
		pcs = make([]uintptr, len(pcs)*2)
		n = runtime.Callers(1, pcs)
	}
	pcs = pcs[:n]
	// Start at the call site's function (the record's PC is a return address in it).
	if f := runtime.FuncForPC(pc); f != nil {
		if i := slices.IndexFunc(pcs, func(p uintptr) bool { g := runtime.FuncForPC(p - 1); return g != nil && g.Entry() == f.Entry() }); i >= 0 {
			pcs = pcs[i:]
		}
	}
	frames := runtime.CallersFrames(pcs)
	first := true
	for f, more := frames.Next(); more; f, more = frames.Next() {
		if !first {
			b = append(b, '\n')
		}
		first = false
		b = append(b, f.Function...)
		b = append(b, '\n', '\t')
		b = append(b, f.File...)
		b = append(b, ':')
		b = appendInt(b, int64(f.Line))
	}
	return b
}

package istiolog

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
)

// Level is one of Istio's levels, in Istio's order: a scope at level L writes records of L and
// every level before it (pkg/log/options.go at 1.30.3).
type Level uint8

const (
	None Level = iota
	Fatal
	Error
	Warn
	Info
	Debug
)

var levelNames = [...]string{None: "none", Fatal: "fatal", Error: "error", Warn: "warn", Info: "info", Debug: "debug"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel reads one of Istio's level names (exactly: no "warning", no upper case).
func ParseLevel(s string) (Level, bool) {
	for l, name := range levelNames {
		if s == name {
			return Level(l), true
		}
	}
	return None, false
}

// LevelFatal is the slog level Wingman writes as Istio's "fatal".
const LevelFatal = slog.Level(12)

// min is the lowest slog level a scope at l writes.
func (l Level) min() slog.Level {
	switch l {
	case Fatal:
		return LevelFatal
	case Error:
		return slog.LevelError
	case Warn:
		return slog.LevelWarn
	case Info:
		return slog.LevelInfo
	case Debug:
		return slog.Level(math.MinInt)
	}
	return slog.Level(math.MaxInt)
}

// of is the Istio level a slog record level is written as.
func of(l slog.Level) Level {
	switch {
	case l >= LevelFatal:
		return Fatal
	case l >= slog.LevelError:
		return Error
	case l >= slog.LevelWarn:
		return Warn
	case l >= slog.LevelInfo:
		return Info
	}
	return Debug
}

// names of the levels as records carry them (zapcore.LowercaseLevelEncoder).
func (l Level) recordName() string {
	if l == None {
		return "none"
	}
	return levelNames[l]
}

// scopedLevel is one "scope:level" of a level list.
type scopedLevel struct {
	scope string
	level Level
}

// parseLevels reads a comma-separated list of "scope:level" or a bare level (the default scope)
// as Istio's convertScopedLevel: no trimming, an empty entry is an invalid level.
func parseLevels(spec string) ([]scopedLevel, error) {
	var out []scopedLevel
	for sl := range strings.SplitSeq(spec, ",") {
		scope, lv := DefaultScope, sl
		switch pieces := strings.Split(sl, ":"); len(pieces) {
		case 1:
		case 2:
			scope, lv = pieces[0], pieces[1]
		default:
			return nil, fmt.Errorf("invalid output level format '%s'", sl)
		}
		l, ok := ParseLevel(lv)
		if !ok {
			return nil, fmt.Errorf("invalid output level '%s'", lv)
		}
		out = append(out, scopedLevel{scope, l})
	}
	return out, nil
}

// levelOf applies a level list to one scope, in order, from start ("all" sets every scope).
func levelOf(list []scopedLevel, scope string, start Level) Level {
	l := start
	for _, e := range list {
		if e.scope == scope || e.scope == AllScopes {
			l = e.level
		}
	}
	return l
}

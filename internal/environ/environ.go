// Package environ reads a process environment given as a list ("NAME=value" entries, as
// os.Environ returns it), so that the agent's parts read the environment they are handed, never
// the process's own, with one rule for a variable given more than once: the first entry wins.
//
// That is Go's rule, which Istio's agent reads its environment by (os.Getenv, os.Environ): at
// the first look-up, syscall's copyenv (src/syscall/env_unix.go) records each name at its first
// mention and clears every later entry of that name, so os.Getenv returns the first value and
// os.Environ omits the later entries.
package environ

import "strings"

// Lookup returns the value of the first entry for name, and whether there is one.
func Lookup(env []string, name string) (string, bool) {
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return kv[len(name)+1:], true
		}
	}
	return "", false
}

// Unique returns env without the later entries of a repeated name, and without entries that
// have no '=': what os.Environ returns for it. It returns env itself when nothing is dropped.
func Unique(env []string) []string {
	seen := make(map[string]struct{}, len(env))
	var out []string // nil until an entry is dropped
	for i, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		_, dup := seen[name]
		if ok && !dup {
			seen[name] = struct{}{}
			if out != nil {
				out = append(out, kv)
			}
			continue
		}
		if out == nil {
			out = append(make([]string, 0, len(env)-1), env[:i]...)
		}
	}
	if out == nil {
		return env
	}
	return out
}

// Map returns env as a map from name to value, the first entry of a name winning.
func Map(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return m
}

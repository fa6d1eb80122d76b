package main

import "testing"

// TestConcurrencyRules: Istio's order (pilot-agent config.go): ProxyConfig concurrency, else
// ISTIO_CPU_LIMIT when positive; the legacy --concurrency flag overrides both.
func TestConcurrencyRules(t *testing.T) {
	for _, tc := range []struct {
		name                string
		set                 bool
		pc, flag, cpu, want int
		warned              bool
	}{
		{"nothing set: Envoy's default", false, 0, 0, 0, 0, false},
		{"CPU limit fills an unset concurrency", false, 0, 0, 3, 3, false},
		{"ProxyConfig wins over the CPU limit", true, 2, 0, 3, 2, false},
		{"explicit 0 in ProxyConfig wins over the CPU limit", true, 0, 0, 3, 0, false},
		{"flag wins over both", true, 2, 5, 3, 5, true},
	} {
		s := defaultSettings()
		s.Concurrency, s.ConcurrencySet = tc.pc, tc.set
		warned := false
		applyConcurrency(&s, tc.flag, tc.cpu, func(string, ...any) { warned = true })
		if s.Concurrency != tc.want || warned != tc.warned {
			t.Errorf("%s: concurrency %d (warned %v), want %d (%v)", tc.name, s.Concurrency, warned, tc.want, tc.warned)
		}
	}
}

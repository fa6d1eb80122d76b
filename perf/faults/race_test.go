//go:build race

package faults

// raceEnabled: the race detector distorts CPU and memory ratios; the gate runs without it
// (`make gate`), the harness's other tests run with it.
const raceEnabled = true

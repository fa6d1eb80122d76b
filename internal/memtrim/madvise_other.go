//go:build !linux

package memtrim

// dontNeed does nothing where the agent does not run in production.
func dontNeed(addr, length uintptr) error { return nil }

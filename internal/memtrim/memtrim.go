// Package memtrim drops the process's mappings of its own executable's read-only pages once
// start-up is over.
//
// Most of an idle agent's VmRSS is not memory it owns: it is the binary's code and read-only
// data, mapped from the page cache. Start-up runs code from all over the binary (package
// initialisation, flag and config parsing, TLS, gRPC, bootstrap rendering), and the kernel maps
// up to 64 KiB around every page fault (fault-around), so by the time the agent is idle nearly
// the whole 15 MB binary is mapped although the idle agent runs a small part of it.
// madvise(MADV_DONTNEED) on those read-only file mappings unmaps them: the pages stay in the page
// cache (shared with every other process of the same binary; reclaimable once nothing maps them),
// and whatever the agent runs afterwards is mapped again by ordinary minor faults. Writable
// mappings (the data segment, whose written pages are the process's own) are never touched.
package memtrim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Release unmaps the read-only mappings of the running executable and returns how many bytes
// of address space it advised. It changes no memory content: a read-only private file mapping
// has no private pages to lose.
func Release() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	defer f.Close()
	ranges, err := readOnlyRanges(f, exe)
	if err != nil {
		return 0, fmt.Errorf("memtrim: /proc/self/maps: %w", err)
	}
	var n int
	for _, r := range ranges {
		if err := dontNeed(r[0], r[1]-r[0]); err != nil {
			return n, fmt.Errorf("memtrim: madvise %#x-%#x: %w", r[0], r[1], err)
		}
		n += int(r[1] - r[0])
	}
	return n, nil
}

// readOnlyRanges returns the [start, end) address ranges of the mappings of path in a
// /proc/<pid>/maps listing that are neither writable nor shared.
func readOnlyRanges(r io.Reader, path string) ([][2]uintptr, error) {
	var out [][2]uintptr
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// address perms offset dev inode pathname
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[5] != path || len(f[1]) != 4 || f[1][1] != '-' || f[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("bad address range %q", f[0])
		}
		a, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("bad address range %q", f[0])
		}
		b, err := strconv.ParseUint(hi, 16, 64)
		if err != nil || b <= a {
			return nil, fmt.Errorf("bad address range %q", f[0])
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out, sc.Err()
}

package main

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// applyMemoryLimit sets the Go runtime's soft memory limit to ratio times the container's
// cgroup memory limit, so that the garbage collector works harder before the kernel kills the
// container during a large push. It does nothing for a zero ratio or a cgroup without a limit.
// root is "/" outside tests. It returns the limit set, or 0.
func applyMemoryLimit(ratio float64, root string) (int64, error) {
	if ratio == 0 {
		return 0, nil
	}
	limit, err := cgroupMemoryLimit(root)
	if err != nil || limit == 0 {
		return 0, err
	}
	set := int64(float64(limit) * ratio)
	debug.SetMemoryLimit(set)
	return set, nil
}

// unlimitedV1 is the smallest cgroup v1 memory.limit_in_bytes that means "no limit" (the kernel
// reports the largest page-aligned int64).
const unlimitedV1 = 1 << 62

// cgroupMemoryLimit is the memory limit of this process's cgroup, the smallest set on its path
// up to the cgroup mount's root (a pod-level limit counts too), or 0 when there is none. The v1
// memory controller is used when mounted (hybrid hosts), else the v2 unified hierarchy.
func cgroupMemoryLimit(root string) (int64, error) {
	mounts, err := cgroupMounts(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return 0, err
	}
	paths, err := cgroupPaths(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, err
	}
	for _, c := range []struct {
		key, file string
	}{{"memory", "memory.limit_in_bytes"}, {"", "memory.max"}} {
		m, okM := mounts[c.key]
		p, okP := paths[c.key]
		if !okM || !okP {
			continue
		}
		rel, err := filepath.Rel(m.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = "." // the cgroup namespace's root: the mount point itself
		}
		top := filepath.Join(root, m.point)
		var limit int64
		for dir := filepath.Join(top, rel); ; dir = filepath.Dir(dir) {
			if v, ok := readLimit(filepath.Join(dir, c.file)); ok && (limit == 0 || v < limit) {
				limit = v
			}
			if dir == top || len(dir) <= len(top) {
				break
			}
		}
		return limit, nil
	}
	return 0, nil
}

// readLimit reads a memory.max or memory.limit_in_bytes value; ok is false for "no limit".
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= unlimitedV1 || v == math.MaxInt64 {
		return 0, false // "max", unparsable or unlimited
	}
	return v, true
}

type cgroupMount struct{ root, point string }

// cgroupMounts reads mountinfo: the v1 memory controller's mount under "memory", the v2
// unified hierarchy under "".
func cgroupMounts(path string) (map[string]cgroupMount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		m := cgroupMount{root: fields[3], point: fields[4]}
		switch tail[0] {
		case "cgroup2":
			out[""] = m
		case "cgroup":
			for opt := range strings.SplitSeq(tail[2], ",") {
				if opt == "memory" {
					out["memory"] = m
				}
			}
		}
	}
	return out, sc.Err()
}

// cgroupPaths reads /proc/self/cgroup: the memory controller's path under "memory", the v2
// path under "".
func cgroupPaths(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "memory" {
				out["memory"] = parts[2]
			}
		}
	}
	return out, nil
}

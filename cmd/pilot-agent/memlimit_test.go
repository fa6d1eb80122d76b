package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// cgroupTree lays out a fake /proc/self and /sys/fs/cgroup under a temporary root.
func cgroupTree(t *testing.T, mountinfo, cgroup string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["proc/self/mountinfo"], files["proc/self/cgroup"] = mountinfo, cgroup
	for p, content := range files {
		path := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	mountsV2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	// A hybrid host with the memory controller on v1, mounted at a namespaced root.
	mountsV1 = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n" +
		"35 31 0:32 /kubepods/pod1/ctr /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, mounts, cgroup string
		files                map[string]string
		want                 int64
	}{
		{"v2, namespaced container", mountsV2, "0::/", map[string]string{
			"sys/fs/cgroup/memory.max": "268435456"}, 256 << 20},
		{"v2, no limit", mountsV2, "0::/", map[string]string{
			"sys/fs/cgroup/memory.max": "max"}, 0},
		{"v2, host view: the pod's limit is smaller than the container's", mountsV2, "0::/kubepods/pod1/ctr", map[string]string{
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max",
			"sys/fs/cgroup/kubepods/pod1/memory.max":     "134217728",
			"sys/fs/cgroup/kubepods/memory.max":          "max"}, 128 << 20},
		{"v1 memory controller (hybrid host), mount root is the container", mountsV1,
			"4:memory:/kubepods/pod1/ctr\n3:cpu,cpuacct:/kubepods/pod1/ctr\n0::/kubepods/pod1/ctr", map[string]string{
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912",
				"sys/fs/cgroup/unified/memory.max":           "1"}, 512 << 20}, // v1 wins where it is mounted
		{"v1 unlimited", mountsV1, "4:memory:/kubepods/pod1/ctr", map[string]string{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"no cgroup mounted", "22 1 0:5 / /proc rw - proc proc rw\n", "0::/", map[string]string{}, 0},
	} {
		root := cgroupTree(t, tc.mounts, tc.cgroup, tc.files)
		got, err := cgroupMemoryLimit(root)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := cgroupMemoryLimit(t.TempDir()); err == nil {
		t.Error("no /proc/self/mountinfo: no error")
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	root := cgroupTree(t, mountsV2, "0::/", map[string]string{"sys/fs/cgroup/memory.max": "1000000000"})
	got, err := applyMemoryLimit(0.9, root)
	if err != nil || got != 900_000_000 || debug.SetMemoryLimit(-1) != 900_000_000 {
		t.Fatalf("applied %d (%v); runtime limit %d", got, err, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(prev)
	if got, _ := applyMemoryLimit(0, root); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatal("a zero ratio (GOMEMLIMIT set, or AUTOMEMLIMIT=off) changed the runtime's limit")
	}
	unlimited := cgroupTree(t, mountsV2, "0::/", map[string]string{"sys/fs/cgroup/memory.max": "max"})
	if got, _ := applyMemoryLimit(0.9, unlimited); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatal("a cgroup without a limit changed the runtime's limit")
	}
}

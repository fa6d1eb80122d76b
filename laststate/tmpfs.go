package laststate

import (
	"fmt"
	"syscall"
)

// tmpfsMagic is TMPFS_MAGIC of linux/magic.h: the f_type statfs(2) reports for a tmpfs.
const tmpfsMagic = 0x01021994

// CheckTmpfs refuses a directory that is not on a tmpfs: the snapshot holds the workload's private
// key, so it may live only where the agent's memory does (a memory-backed emptyDir inside the
// pod), never on a volume backed by the node's disk.
func CheckTmpfs(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("last-state directory %s: %w", dir, err)
	}
	if st.Type != tmpfsMagic {
		return fmt.Errorf("last-state directory %s is not on a tmpfs (filesystem type %#x): the snapshot holds the workload key and is kept only in memory-backed volumes", dir, st.Type)
	}
	return nil
}

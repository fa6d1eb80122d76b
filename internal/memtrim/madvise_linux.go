package memtrim

import "syscall"

func dontNeed(addr, length uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, addr, length, syscall.MADV_DONTNEED); e != 0 {
		return e
	}
	return nil
}

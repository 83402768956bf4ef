// Command undumpable makes itself undumpable (prctl PR_SET_DUMPABLE 0), as a
// workload hiding from a process list would, then sleeps for the seconds
// of its argument. The kernel then gives its /proc directory to root: the
// tests check that a Run's process doing so is still found and killed.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

const prSetDumpable = 4

func main() {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl:", errno)
		os.Exit(1)
	}
	seconds := 600
	if len(os.Args) > 1 {
		if n, err := strconv.Atoi(os.Args[1]); err == nil {
			seconds = n
		}
	}
	time.Sleep(time.Duration(seconds) * time.Second)
}

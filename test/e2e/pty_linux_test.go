package e2e

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/term"
)

// openPTY opens a pseudo-terminal in raw mode (no newline translation): the
// side a program writes to as its terminal, and the side that reads what it
// wrote. Both are closed when the spec ends.
func openPTY() (tty, reader *os.File) {
	// Non-blocking, so that reads honour a deadline.
	fd, err := syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	unlock, n := int32(0), uint32(0)
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	ExpectWithOffset(1, e).To(BeZero(), "unlock pty")
	_, _, e = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	ExpectWithOffset(1, e).To(BeZero(), "pty number")
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	DeferCleanup(master.Close)
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(slave.Close)
	_, err = term.MakeRaw(int(slave.Fd()))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return slave, master
}

// readAvailable reads what is waiting on the pty, until nothing more comes
// for half a second.
func readAvailable(reader *os.File) string {
	var out []byte
	buf := make([]byte, 4096)
	for {
		ExpectWithOffset(1, reader.SetReadDeadline(time.Now().Add(500*time.Millisecond))).To(Succeed())
		n, err := reader.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return string(out)
		}
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
}

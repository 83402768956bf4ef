// Command inotify opens inotify instances, for the tests of per-user
// kernel limits: "inotify hold" opens them until the kernel refuses one,
// reports how many it got and keeps them while it lives; "inotify try"
// opens one and says whether it could.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: inotify hold|try")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "hold":
		n := 0
		for ; n < 100000; n++ {
			if _, err := syscall.InotifyInit1(0); err != nil {
				fmt.Printf("held %d; the next: %v\n", n, err)
				break
			}
		}
		_ = os.Stdout.Close()
		time.Sleep(time.Hour)
	case "try":
		if _, err := syscall.InotifyInit1(0); err != nil {
			fmt.Printf("inotify_init: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("inotify works")
	}
}

// Command euid prints its effective user ID. The test image carries it
// setuid root: without no-new-privileges it would print 0; the escape tests
// check that in a sandbox it prints the sandbox's uid.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println(os.Geteuid())
}

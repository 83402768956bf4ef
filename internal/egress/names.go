package egress

import (
	"fmt"
	"strings"
)

// LongName is a valid host name of the given length (70 or more),
// different for each i below 100: "hNN", labels of 63 characters at most,
// ".io". The tests of the largest allowlist admission accepts use it.
func LongName(i, length int) string {
	name := fmt.Sprintf("h%02d", i)
	for left := length - len(name) - len(".io"); left > 0; left = length - len(name) - len(".io") {
		l := min(63, left-1)
		if left-1-l == 1 {
			l-- // never a last label of nothing
		}
		name += "." + strings.Repeat("a", l)
	}
	return name + ".io"
}

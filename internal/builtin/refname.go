package builtin

import (
	"errors"
	"fmt"
	"strings"
)

// MaxRefName bounds a git ref name, as the CRD does.
const MaxRefName = 200

// ValidateRefName accepts the git ref names the CRD accepts: components of
// letters, digits, "_", "-" and "." separated by single slashes, none
// starting with "." or "-", none ending with "." or ".lock", and no "..".
// They are safe as branch names, as paths under /workspace/lanes, and as
// arguments (nothing starts with "-").
func ValidateRefName(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxRefName:
		return fmt.Errorf("longer than %d characters", MaxRefName)
	case strings.Contains(s, ".."):
		return errors.New(`contains ".."`)
	}
	for _, c := range strings.Split(s, "/") {
		if c == "" {
			return errors.New("has an empty component (a leading, trailing or double slash)")
		}
		if c[0] == '.' || c[0] == '-' {
			return fmt.Errorf("component %q starts with %q", c, c[0])
		}
		if strings.HasSuffix(c, ".") || strings.HasSuffix(c, ".lock") {
			return fmt.Errorf("component %q ends with \".\" or \".lock\"", c)
		}
		for _, r := range c {
			if !refChar(r) {
				return fmt.Errorf("contains %q", r)
			}
		}
	}
	return nil
}

// refChar is true for the characters a ref name component may hold.
func refChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}

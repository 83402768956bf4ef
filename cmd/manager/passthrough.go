package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"afe.dev/sandbox/internal/sandboxspec"
)

var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// passthrough reads --env-passthrough: each listed name with its value in
// the manager's environment (nil when unset). A name that is not a variable
// name, or that the deny list (built-in or --deny-env) refuses, is an error:
// the deny list wins.
func passthrough(list string, denyEnv []string, lookup func(string) (string, bool)) (map[string]*string, error) {
	deny := map[string]bool{}
	for _, n := range append(slices.Clone(sandboxspec.DefaultDenyEnv), denyEnv...) {
		deny[strings.ToUpper(n)] = true
	}
	out := map[string]*string{}
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !envNamePattern.MatchString(name) || len(name) > 128 {
			return nil, fmt.Errorf("%q is not a variable name", name)
		}
		if deny[strings.ToUpper(name)] {
			return nil, fmt.Errorf("%s is on the deny list and cannot be passed through", name)
		}
		out[name] = nil
		if v, ok := lookup(name); ok {
			out[name] = &v
		}
	}
	return out, nil
}

// sortedNames lists the names passed through, an unset one marked so (for
// the log: never a value).
func sortedNames(m map[string]*string) []string {
	names := make([]string, 0, len(m))
	for n, v := range m {
		if v == nil {
			n += " (unset)"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

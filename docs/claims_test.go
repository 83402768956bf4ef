// Package docs holds the project's documents. Its test checks that every
// test the threat model names exists where the document says it is, so a
// claim cannot outlive its proof.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// reference is one place a claim names: a file or package, and the tests
// (Go test functions, or the text of Ginkgo specs) in it.
type reference struct {
	path  string
	funcs []string // TestX, FuzzX; a trailing * is a prefix
	specs []string // the text of a spec, up to an ellipsis
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	quoted     = regexp.MustCompile(`"([^"]+)"`)
	testFunc   = regexp.MustCompile(`^(Test|Fuzz)[A-Za-z0-9_]*\*?$`)
)

// references reads the test cell of a claims table row: `path` entries,
// each with an optional parenthesis of `TestX` and "spec text…" items, and
// bare `TestX` items that belong to the path before them.
func references(cell string) []reference {
	var out []reference
	for i := 0; i < len(cell); {
		loc := backticked.FindStringSubmatchIndex(cell[i:])
		if loc == nil {
			break
		}
		tok := cell[i+loc[2] : i+loc[3]]
		i += loc[1]
		switch {
		case strings.Contains(tok, "/"):
			ref := reference{path: tok}
			rest := strings.TrimLeft(cell[i:], " ")
			if strings.HasPrefix(rest, "(") {
				inner, n := parenthesis(rest)
				i += len(cell[i:]) - len(rest) + n
				for _, m := range backticked.FindAllStringSubmatch(inner, -1) {
					if testFunc.MatchString(m[1]) {
						ref.funcs = append(ref.funcs, m[1])
					}
				}
				for _, m := range quoted.FindAllStringSubmatch(inner, -1) {
					ref.specs = append(ref.specs, strings.TrimSuffix(m[1], "…"))
				}
			}
			out = append(out, ref)
		case testFunc.MatchString(tok) && len(out) > 0:
			out[len(out)-1].funcs = append(out[len(out)-1].funcs, tok)
		}
	}
	return out
}

// parenthesis returns what s, which starts with "(", holds up to its
// closing parenthesis (quotes and backticks may hold parentheses), and how
// long the whole is.
func parenthesis(s string) (string, int) {
	depth, inQuote, inTick := 0, false, false
	for i, r := range s {
		switch {
		case r == '"' && !inTick:
			inQuote = !inQuote
		case r == '`' && !inQuote:
			inTick = !inTick
		case inQuote || inTick:
		case r == '(':
			depth++
		case r == ')':
			depth--
			if depth == 0 {
				return s[1:i], i + 1
			}
		}
	}
	return s[1:], len(s)
}

// sources is the Go test code at path: the file, or every test file of the
// package there.
func sources(t *testing.T, root, path string) string {
	t.Helper()
	full := filepath.Join(root, path)
	fi, err := os.Stat(full)
	if err != nil {
		t.Errorf("%s: named in the threat model, does not exist", path)
		return ""
	}
	files := []string{full}
	if fi.IsDir() {
		files, _ = filepath.Glob(filepath.Join(full, "*_test.go"))
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

func TestThreatModelNamesTestsThatExist(t *testing.T) {
	doc, err := os.ReadFile("threat-model.md")
	if err != nil {
		t.Fatal(err)
	}
	inClaims, rows := false, 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			inClaims = strings.Contains(line, "Claims")
			continue
		}
		if !inClaims || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| claim") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		refs := references(cells[len(cells)-1])
		if len(refs) == 0 {
			t.Errorf("a claim names no test: %s", line)
			continue
		}
		rows++
		for _, ref := range refs {
			src := sources(t, "..", ref.path)
			for _, f := range ref.funcs {
				if name, ok := strings.CutSuffix(f, "*"); ok {
					if !strings.Contains(src, "func "+name) {
						t.Errorf("%s: no test starting with %s", ref.path, name)
					}
				} else if !strings.Contains(src, "func "+f+"(") {
					t.Errorf("%s: no test %s", ref.path, f)
				}
			}
			for _, s := range ref.specs {
				if !strings.Contains(src, `"`+s) {
					t.Errorf("%s: no spec %q", ref.path, s)
				}
			}
		}
	}
	if rows < 20 {
		t.Fatalf("read %d claims; the table was not found as expected", rows)
	}
}

func TestReferences(t *testing.T) {
	got := references("`a/b_test.go` (\"one spec…\", `TestX`), `internal/p` (`TestY`; `TestZ*`: why (with parens)), `c/d`, `FuzzW`")
	want := []reference{
		{path: "a/b_test.go", funcs: []string{"TestX"}, specs: []string{"one spec"}},
		{path: "internal/p", funcs: []string{"TestY", "TestZ*"}},
		{path: "c/d", funcs: []string{"FuzzW"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].path != want[i].path || strings.Join(got[i].funcs, ",") != strings.Join(want[i].funcs, ",") ||
			strings.Join(got[i].specs, ",") != strings.Join(want[i].specs, ",") {
			t.Errorf("reference %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

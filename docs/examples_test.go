package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pythonExample is the Python example the documents show, the file the
// Python client's tests run as written (clients/python/tests).
var pythonExample = filepath.Join("..", "clients", "python", "examples", "readme.py")

// pythonBlocks are the fenced ```python blocks of a Markdown text, each
// with its final newline.
func pythonBlocks(text string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```python":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// The Python example of docs/python.md and the README's are the tested
// file, byte for byte: a change to either is made to both.
func TestPythonExampleIsTheTestedFile(t *testing.T) {
	want, err := os.ReadFile(pythonExample)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"python.md", filepath.Join("..", "README.md")} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, b := range pythonBlocks(string(data)) {
			if strings.Contains(b, "afe_sandbox.Client(") {
				found = append(found, b)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s shows %d examples of afe_sandbox.Client, want the one of %s", doc, len(found), pythonExample)
		}
		for _, b := range found {
			if diff := cmp.Diff(string(want), b); diff != "" {
				t.Errorf("%s: its example differs from %s (-file +doc):\n%s", doc, pythonExample, diff)
			}
		}
	}
}

func TestPythonBlocks(t *testing.T) {
	got := pythonBlocks("text\n```python\nimport x\nx.y()\n```\n```sh\nls\n```\n  ```python\nz = 1\n  ```\n")
	if diff := cmp.Diff([]string{"import x\nx.y()\n", "z = 1\n"}, got); diff != "" {
		t.Error(diff)
	}
}

package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeMaxLines is the README's length in the contract: at most 250 lines.
const readmeMaxLines = 250

// The README is at most 250 lines and opens with the two commands a new
// user runs first, make run and make test, before any prose.
func TestReadmeIsShortAndOpensWithMakeRunAndMakeTest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("the README has %d lines; at most %d", len(lines), readmeMaxLines)
	}
	var block []string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "```sh") || l == "" {
			continue
		}
		if strings.HasPrefix(l, "```") {
			break
		}
		block = append(block, l)
	}
	if len(block) < 2 || !strings.HasPrefix(block[0], "make run ") || !strings.HasPrefix(block[1], "make test ") {
		t.Errorf("the README's first block does not open with make run and make test: %q", block)
	}
}

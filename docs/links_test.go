package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	// mdLink is an inline link or image, [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef is a reference definition, [label]: target.
	refDef  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	atxHead = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	fence   = regexp.MustCompile("^ {0,3}(```+|~~~+)")
)

// documents are the files whose links are checked: the README and docs/*.md.
func documents(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// unfenced is a Markdown file's lines with those of fenced code blocks
// blanked: a link or a heading there means nothing.
func unfenced(text string) []string {
	var out []string
	inFence := ""
	for _, line := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1][:3]
			case strings.HasPrefix(m[1], inFence):
				inFence = ""
			}
			line = ""
		}
		if inFence != "" {
			line = ""
		}
		out = append(out, line)
	}
	return out
}

// prose is a Markdown file without its fenced code blocks and inline code
// spans, where a link means nothing.
func prose(text string) []string {
	lines := unfenced(text)
	for i, line := range lines {
		lines[i] = codeSpan.ReplaceAllString(line, "``")
	}
	return lines
}

var codeSpan = regexp.MustCompile("`+[^`]*`+")

// slug is GitHub's anchor of a heading: lower case, spaces to '-', every
// character but letters, digits, '-' and '_' dropped (code spans and links
// keep their text).
func slug(heading string) string {
	heading = mdLink.ReplaceAllStringFunc(heading, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }

// anchorsOf lists a file's anchors as GitHub makes them: the second heading
// with the same anchor gets -1, the third -2.
func anchorsOf(text string) map[string]bool {
	out, seen := map[string]bool{}, map[string]int{}
	for _, line := range unfenced(text) {
		m := atxHead.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(strings.ReplaceAll(m[2], "`", ""))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// targets are the links of a file that are checked: relative ones and
// anchors, never http, https, mailto or other schemes.
func targets(text string) []string {
	var out []string
	for _, line := range prose(text) {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		for _, m := range refDef.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	var kept []string
	for _, t := range out {
		if scheme.MatchString(t) {
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func TestLinksAndAnchorsPointSomewhere(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsIn := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = anchorsOf(string(data))
		return anchors[path]
	}
	checked := 0
	for _, doc := range documents(t) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range targets(string(data)) {
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), filepath.FromSlash(path))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %q: %s does not exist", doc, target, file)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", doc, target)
				continue
			}
			if !anchorsIn(file)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", doc, target, file, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links; the documents were not read as expected", checked)
	}
}

func TestSlugAndAnchors(t *testing.T) {
	for heading, want := range map[string]string{
		"Paused and Suspended: two different things": "paused-and-suspended-two-different-things",
		"Hostile code: a user-space kernel (gVisor)": "hostile-code-a-user-space-kernel-gvisor",
		"A sandbox was recreated (`SandboxLost`)":    "a-sandbox-was-recreated-sandboxlost",
		"Ticket (`sandbox.afe.dev/v1alpha1`)":        "ticket-sandboxafedevv1alpha1",
		"snake_case and [a link](x.md)":              "snake_case-and-a-link",
	} {
		if got := slug(strings.ReplaceAll(heading, "`", "")); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	got := anchorsOf("# A\n## A\n```\n# A\n```\n### A\n## B ##\n")
	for _, want := range []string{"a", "a-1", "a-2", "b"} {
		if !got[want] {
			t.Errorf("anchors %v lack %q", got, want)
		}
	}
	if got["a-3"] {
		t.Errorf("a heading in a code block made an anchor: %v", got)
	}
	links := targets("[x](a.md#b) `[y](no.md)` [z](https://example.com) [w](#c \"t\")\n```\n[v](gone.md)\n```\n[r]: ../r.md\n")
	if diff := cmp.Diff([]string{"a.md#b", "#c", "../r.md"}, links); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

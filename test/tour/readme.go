// Package tour runs the README's five-minute tour as written: it reads the
// tour's shell blocks from README.md itself, runs their commands in order
// with bash against a local control plane started the way `make run` starts
// it, and checks what the README's comments promise of each command. This
// file reads the tour out of the README; the test is in tour_test.go.
package tour

import (
	"errors"
	"fmt"
	"strings"
)

// Heading is the line that opens the tour's section of README.md; the
// section ends at the next heading of the same level.
const Heading = "## A five-minute tour"

// Command is one command of the tour, as the README writes it.
type Command struct {
	// Text is the command as written, on one line or several (a line
	// continued with a backslash, a heredoc's body), its comment included:
	// what bash runs.
	Text string
	// Code is Text's first lines without the comment and the heredoc's
	// body, trimmed: what the command is, for recognising `make run`.
	Code string
	// Comment is the comment at the end of the command's line, without its
	// "#", trimmed; empty when it has none.
	Comment string
	// Output are the comment lines right below the command, without their
	// "# ": the output the README shows for it.
	Output []string
	// Block is the number of its shell block in the section, from 1.
	Block int
}

// Blocks returns the bodies of the ```sh blocks of the tour's section of
// readme, in order. A missing section, a section without a shell block, or a
// block left open is an error: the tour has gone missing.
func Blocks(readme string) ([]string, error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, " \t") == Heading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("README.md has no section %q", Heading)
	}
	var blocks []string
	var body []string
	open := false
	for _, l := range lines[start:] {
		switch {
		case !open && strings.HasPrefix(l, "## "):
			return finish(blocks)
		case !open && strings.TrimSpace(l) == "```sh":
			open, body = true, nil
		case !open && strings.HasPrefix(strings.TrimSpace(l), "```"):
			// A block in another language would be skipped, and a command
			// in it never run: the tour's blocks are sh.
			return nil, fmt.Errorf("a block %q in %q: the tour's commands are in ```sh blocks, which the test runs", strings.TrimSpace(l), Heading)
		case open && strings.TrimSpace(l) == "```":
			open = false
			blocks = append(blocks, strings.Join(body, "\n"))
		case open:
			body = append(body, l)
		}
	}
	if open {
		return nil, fmt.Errorf("a ```sh block of %q is not closed", Heading)
	}
	return finish(blocks)
}

func finish(blocks []string) ([]string, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("the section %q of README.md has no ```sh block", Heading)
	}
	return blocks, nil
}

// Commands splits the blocks into their commands, in order. A comment line
// right below a command is output it shows; a comment line with no command
// before it in its block is an error, as is a heredoc left open.
func Commands(blocks []string) ([]Command, error) {
	var cmds []Command
	for b, block := range blocks {
		lines := strings.Split(block, "\n")
		first := len(cmds)
		for i := 0; i < len(lines); {
			trimmed := strings.TrimSpace(lines[i])
			switch {
			case trimmed == "":
				i++
			case strings.HasPrefix(trimmed, "#"):
				if len(cmds) == first {
					return nil, fmt.Errorf("block %d: the comment %q follows no command", b+1, trimmed)
				}
				last := &cmds[len(cmds)-1]
				last.Output = append(last.Output, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
				i++
			default:
				cmd, next, err := command(lines, i)
				if err != nil {
					return nil, fmt.Errorf("block %d: %w", b+1, err)
				}
				cmd.Block = b + 1
				cmds = append(cmds, cmd)
				i = next
			}
		}
	}
	return cmds, nil
}

// command reads the command that starts at lines[i]: its lines continued
// with a backslash, then the bodies of its heredocs. It returns the index
// of the line after it.
func command(lines []string, i int) (Command, int, error) {
	head := []string{lines[i]}
	for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
		i++
		head = append(head, lines[i])
	}
	i++
	code, comment, heredocs := lex(strings.Join(head, "\n"))
	text := head
	for _, h := range heredocs {
		for {
			if i >= len(lines) {
				return Command{}, 0, fmt.Errorf("the heredoc %s of %q is not closed", h.word, head[0])
			}
			l := lines[i]
			i++
			text = append(text, l)
			if h.dash {
				l = strings.TrimLeft(l, "\t")
			}
			if l == h.word {
				break
			}
		}
	}
	return Command{Text: strings.Join(text, "\n"), Code: strings.TrimSpace(code), Comment: comment}, i, nil
}

// heredoc is a here-document a command opens: the word that ends it, and
// whether leading tabs are stripped from its lines (<<-).
type heredoc struct {
	word string
	dash bool
}

// lex reads a command's lines as the shell would, as far as the tour needs:
// quotes and backslashes, a comment (a # that starts a word, outside
// quotes, to the end of its line), and the heredocs it opens. It returns
// the command without its comment, the comment (the last one, trimmed,
// without its #) and the heredocs.
func lex(s string) (string, string, []heredoc) {
	var code strings.Builder
	var comment string
	var docs []heredoc
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\' && i+1 < len(s):
			code.WriteByte(c)
			i++
			c = s[i]
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || strings.IndexByte(" \t\n", s[i-1]) >= 0):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			comment = strings.TrimSpace(s[i+1 : i+end])
			i += end - 1
			continue
		case strings.HasPrefix(s[i:], "<<") && !strings.HasPrefix(s[i:], "<<<"):
			h, n := heredocWord(s[i+2:])
			docs = append(docs, h)
			code.WriteString(s[i : i+2+n])
			i += 1 + n
			continue
		}
		code.WriteByte(c)
	}
	return code.String(), comment, docs
}

// heredocWord reads the word after a "<<" (an optional -, blanks, then the
// word, quoted or not): the heredoc it opens and how many bytes it took.
func heredocWord(s string) (heredoc, int) {
	var h heredoc
	i := 0
	if strings.HasPrefix(s, "-") {
		h.dash = true
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && (s[i] == '\'' || s[i] == '"') {
		if end := strings.IndexByte(s[i+1:], s[i]); end >= 0 {
			h.word = s[i+1 : i+1+end]
			return h, i + end + 2
		}
	}
	start := i
	for i < len(s) && !strings.ContainsRune(" \t\n;|&<>()", rune(s[i])) {
		i++
	}
	h.word = s[start:i]
	return h, i
}

// ErrNoTour is returned by Tour when the README's tour has no command.
var ErrNoTour = errors.New("the README's tour has no command")

// Tour reads the tour's commands out of the README's text.
func Tour(readme string) ([]Command, error) {
	blocks, err := Blocks(readme)
	if err != nil {
		return nil, err
	}
	cmds, err := Commands(blocks)
	if err != nil {
		return nil, err
	}
	if len(cmds) == 0 {
		return nil, ErrNoTour
	}
	return cmds, nil
}

package tour

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// AnyFailure is Promise.Exit for a command the README says fails, without
// saying with which code.
const AnyFailure = -1

// Promise is what the README says of a command: its exit code, text its
// output holds, columns of the table it prints, and output lines it shows.
type Promise struct {
	// Exit is the exit code it ends with: 0 unless its comment says it
	// fails ("...: fails", AnyFailure) or "exit N".
	Exit int
	// Contains are texts its output (stdout and stderr together) holds.
	Contains []string
	// Columns are columns of the table it prints ("IMAGE"), with the value
	// a row has in it when one is given ("READY 3/3").
	Columns []Column
	// Lines are output lines it shows, in words (see Match).
	Lines [][]string
	// Remark is the comment when it is a remark rather than a promise of
	// output, checked its own way (or, for an aside, not at all).
	Remark string
}

// Column is a column of a table, by its header, and a value one of its rows
// has there ("" for none).
type Column struct {
	Name, Value string
}

var (
	parenthesis = regexp.MustCompile(`\s*\([^)]*\)`)
	exitCode    = regexp.MustCompile(`^exit (\d+)$`)
	column      = regexp.MustCompile(`^([A-Z][A-Z-]*)(?: (\S+))?$`)
)

// Promised reads what the README promises of cmd. Its comment, without
// what is in parentheses (an aside), is a remark when isRemark says so (or
// it is "field: [list]", a field of the file the command applies);
// otherwise its parts separated by ", " are each "exit N", a text ending in
// "fails", a column ("NAME" or "NAME value", the name in capitals), or a
// text the output holds. Each comment line below the command is a line of
// its output.
func Promised(cmd Command, isRemark func(string) bool) Promise {
	var p Promise
	for _, l := range cmd.Output {
		p.Lines = append(p.Lines, strings.Fields(parenthesis.ReplaceAllString(l, "")))
	}
	comment := strings.TrimSpace(parenthesis.ReplaceAllString(cmd.Comment, ""))
	if comment == "" {
		return p
	}
	if isRemark(comment) || AppliedField.MatchString(comment) {
		p.Remark = comment
		return p
	}
	for _, part := range strings.Split(comment, ", ") {
		if m := exitCode.FindStringSubmatch(part); m != nil {
			p.Exit, _ = strconv.Atoi(m[1])
		} else if strings.HasSuffix(part, "fails") {
			p.Exit = AnyFailure
		} else if m := column.FindStringSubmatch(part); m != nil {
			p.Columns = append(p.Columns, Column{Name: m[1], Value: m[2]})
		} else {
			p.Contains = append(p.Contains, part)
		}
	}
	return p
}

// AppliedField is a remark "field: [a, b]": the file the command applies
// has that list in its spec's field.
var AppliedField = regexp.MustCompile(`^(\w+): (\[.*\])$`)

// Check compares what a command did (its exit code and its output, stdout
// and stderr together) with what p promises, but its remark: the problems
// found, none when it kept its promise.
func (p Promise) Check(code int, output string) []string {
	var problems []string
	switch {
	case p.Exit == AnyFailure && code == 0:
		problems = append(problems, "it succeeded; the README says it fails")
	case p.Exit != AnyFailure && code != p.Exit:
		problems = append(problems, fmt.Sprintf("it exited %d; the README implies %d", code, p.Exit))
	}
	for _, s := range p.Contains {
		if !strings.Contains(output, s) {
			problems = append(problems, fmt.Sprintf("its output lacks %q", s))
		}
	}
	for _, c := range p.Columns {
		if err := hasColumn(output, c); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, want := range p.Lines {
		if !hasLine(output, want) {
			problems = append(problems, fmt.Sprintf("no line of its output matches %q", strings.Join(want, " ")))
		}
	}
	return problems
}

// hasLine tells whether a line of output has the words of want (Match).
func hasLine(output string, want []string) bool {
	for _, l := range strings.Split(output, "\n") {
		if Match(want, strings.Fields(l)) {
			return true
		}
	}
	return false
}

var (
	duration = regexp.MustCompile(`^(\d+[smhd])+$`)
	ids      = regexp.MustCompile(`^\d+:\d+$`)
)

// ownID tells whether a uid:gid pair is a sandbox's id of its own, as
// the README's is: uid and gid the same, and not root's.
func ownID(pair string) bool {
	uid, gid, ok := strings.Cut(pair, ":")
	return ids.MatchString(pair) && ok && uid == gid && uid != "0"
}

// Match tells whether the words of an output line are those the README
// shows, loosely: the same words in the same order (so empty columns are
// empty in both), where what differs from run to run may differ: an age
// (3s, 2m10s) and a uid:gid pair (a sandbox's own: the same, not 0).
func Match(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] == got[i] {
			continue
		}
		bothAges := duration.MatchString(want[i]) && duration.MatchString(got[i])
		bothIDs := ids.MatchString(want[i]) && ownID(got[i])
		if !bothAges && !bothIDs {
			return false
		}
	}
	return true
}

// hasColumn checks that output is a table (kubectl get's: a header line of
// names in capitals, the rows below it aligned with them) with the column,
// and, when c has a value, a row with that value in it.
func hasColumn(output string, c Column) error {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	for h, header := range lines {
		start := columnStart(header, c.Name)
		if start < 0 || !strings.HasPrefix(header, "NAME") {
			continue
		}
		if c.Value == "" {
			return nil
		}
		for _, row := range lines[h+1:] {
			if row == "" {
				break
			}
			if start < len(row) && firstWord(row[start:]) == c.Value {
				return nil
			}
		}
		return fmt.Errorf("no row of its table has %s %s", c.Name, c.Value)
	}
	return fmt.Errorf("its output has no table with a column %s", c.Name)
}

// columnStart is where the header has the column name (a whole word), or -1.
func columnStart(header, name string) int {
	for off := 0; ; {
		i := strings.Index(header[off:], name)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(name)
		if (i == 0 || header[i-1] == ' ') && (end == len(header) || header[end] == ' ') {
			return i
		}
		off = end
	}
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 && !strings.HasPrefix(s, " ") {
		return f[0]
	}
	return ""
}

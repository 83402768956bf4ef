package tour

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestBlocks(t *testing.T) {
	for name, tc := range map[string]struct {
		readme  string
		want    []string
		wantErr string
	}{
		"the section's sh blocks, not the next section's": {
			readme: "# x\n```sh\nbefore\n```\n## A five-minute tour\ntext\n```sh\none\n```\n### sub\n```sh\ntwo\nthree\n```\n## Features\n```go\nafter\n```\n",
			want:   []string{"one", "two\nthree"},
		},
		"no section":          {readme: "## Features\n```sh\nx\n```\n", wantErr: "has no section"},
		"a section, no block": {readme: "## A five-minute tour\ntext\n## Features\n", wantErr: "has no ```sh block"},
		"a block left open":   {readme: "## A five-minute tour\n```sh\nx\n", wantErr: "is not closed"},
		"a block in another language, whose commands would not run": {
			readme: "## A five-minute tour\n```sh\nx\n```\n```bash\ny\n```\n", wantErr: "the tour's commands are in ```sh blocks"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Blocks(tc.readme)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	block := strings.Join([]string{
		"make run",
		"kubectl get x   # OUT, exit 1 (an aside)",
		"# NAME   AGE",
		"# x      3s",
		"",
		"echo '# not a comment' \"#nor this\" a#b \\",
		"  more   # the comment",
		"cat <<'EOF' | kubectl apply -f -",
		"# in the heredoc",
		"EOF",
		"cat <<-END",
		"\tbody",
		"\tEND",
	}, "\n")
	got, err := Commands([]string{block})
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Text: "make run", Code: "make run", Block: 1},
		{Text: "kubectl get x   # OUT, exit 1 (an aside)", Code: "kubectl get x", Comment: "OUT, exit 1 (an aside)",
			Output: []string{"NAME   AGE", "x      3s"}, Block: 1},
		{Text: "echo '# not a comment' \"#nor this\" a#b \\\n  more   # the comment",
			Code: "echo '# not a comment' \"#nor this\" a#b \\\n  more", Comment: "the comment", Block: 1},
		{Text: "cat <<'EOF' | kubectl apply -f -\n# in the heredoc\nEOF", Code: "cat <<'EOF' | kubectl apply -f -", Block: 1},
		{Text: "cat <<-END\n\tbody\n\tEND", Code: "cat <<-END", Block: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

func TestCommandsRefuses(t *testing.T) {
	for name, block := range map[string]string{
		"a comment before any command": "# output of nothing\nmake run",
		"a heredoc left open":          "cat <<EOF\nbody",
	} {
		if _, err := Commands([]string{block}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Tour("## A five-minute tour\n```sh\n\n```\n"); !errors.Is(err, ErrNoTour) {
		t.Errorf("a tour without a command: error %v, want %v", err, ErrNoTour)
	}
}

func TestPromised(t *testing.T) {
	isRemark := func(s string) bool { return s == "a remark" }
	for comment, want := range map[string]Promise{
		"":                                  {},
		`{"greeted":true}`:                  {Contains: []string{`{"greeted":true}`}},
		"hello from the sandbox (its env)":  {Contains: []string{"hello from the sandbox"}},
		"403 Forbidden, exit 1":             {Exit: 1, Contains: []string{"403 Forbidden"}},
		"no DNS: fails":                     {Exit: AnyFailure},
		"IMAGE, READY 3/3, CLAIMS":          {Columns: []Column{{"IMAGE", ""}, {"READY", "3/3"}, {"CLAIMS", ""}}},
		"a remark (with an aside)":          {Remark: "a remark"},
		"egress: [allowed.test, other.org]": {Remark: "egress: [allowed.test, other.org]"},
	} {
		got := Promised(Command{Comment: comment, Output: []string{"a  b (aside)"}}, isRemark)
		want.Lines = [][]string{{"a", "b"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: -want +got:\n%s", comment, diff)
		}
	}
}

func TestCheck(t *testing.T) {
	table := "NAME     IMAGE             READY   CLAIMS   AGE\nagents   afe/busybox:dev   3/3              12s\n"
	for name, tc := range map[string]struct {
		p        Promise
		code     int
		output   string
		problems int
	}{
		"kept":                      {Promise{Contains: []string{"hello"}}, 0, "x hello y", 0},
		"a failure where none said": {Promise{}, 1, "", 1},
		"fails as said":             {Promise{Exit: AnyFailure}, 2, "", 0},
		"succeeds where it fails":   {Promise{Exit: AnyFailure}, 0, "", 1},
		"another exit code":         {Promise{Exit: 1}, 2, "", 1},
		"text missing":              {Promise{Contains: []string{"403 Forbidden"}}, 0, "200 OK", 1},
		"columns kept":              {Promise{Columns: []Column{{"IMAGE", ""}, {"READY", "3/3"}, {"CLAIMS", ""}}}, 0, table, 0},
		"a value elsewhere":         {Promise{Columns: []Column{{"READY", "0/3"}, {"CLAIMS", "3/3"}}}, 0, table, 2},
		"no such column":            {Promise{Columns: []Column{{"MISSES", ""}}}, 0, table, 1},
		"an empty cell":             {Promise{Columns: []Column{{"CLAIMS", "12s"}}}, 0, table, 1},
		"lines, ages differ":        {Promise{Lines: [][]string{{"NAME", "IMAGE", "READY", "CLAIMS", "AGE"}, {"agents", "afe/busybox:dev", "3/3", "1m2s"}}}, 0, table, 0},
		"a line differs":            {Promise{Lines: [][]string{{"agents", "afe/busybox:dev", "1/3", "3s"}}}, 0, table, 1},
		"a column filled":           {Promise{Lines: [][]string{{"agents", "afe/busybox:dev", "3/3", "3s"}}}, 0, strings.Replace(table, "3/3              12s", "3/3     1        12s", 1), 1},
	} {
		if got := tc.p.Check(tc.code, tc.output); len(got) != tc.problems {
			t.Errorf("%s: problems %q, want %d", name, got, tc.problems)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		match     bool
	}{
		{"1900012345:1900012345 [ALL] none", "1900004201:1900004201 [ALL] none", true},
		{"1900012345:1900012345 [ALL] none", "1900004201:1900004201 [ALL] bridge", false},
		{"1900012345:1900012345 [ALL] none", "0:0 [ALL] none", false},
		{"1900012345:1900012345 [ALL] none", "1900004201:1900004202 [ALL] none", false},
		{"x Ready 1/1 4s", "x Ready 1/1 2m10s", true},
		{"x Ready 1/1 4s", "x Ready 0/1 4s", false},
		{"x Ready 1/1 4s", "x Ready 1/1 1 4s", false},
	} {
		if got := Match(strings.Fields(tc.want), strings.Fields(tc.got)); got != tc.match {
			t.Errorf("Match(%q, %q) = %v", tc.want, tc.got, got)
		}
	}
}

func TestMakeRun(t *testing.T) {
	for code, want := range map[string][]string{
		"make run": nil,
		`RUN_ARGS="--egress-network=afe-demo --egress-allow-private" make run`: {"--egress-network=afe-demo", "--egress-allow-private"},
		"RUN_ARGS='--a' make run": {"--a"},
		"RUN_ARGS=--b make run":   {"--b"},
	} {
		got, ok := makeRun(code)
		if !ok {
			t.Errorf("%q is not make run", code)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%q: -want +got:\n%s", code, diff)
		}
	}
	for _, code := range []string{"make run-fast", "make build run", "echo make run"} {
		if _, ok := makeRun(code); ok {
			t.Errorf("%q taken for make run", code)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

func TestPassthrough(t *testing.T) {
	env := map[string]string{"PIP_INDEX_URL": "https://index.test/simple", "EMPTY": "", "GITHUB_TOKEN": "t0ken", "CANARY": "c"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	got, err := passthrough(" PIP_INDEX_URL, EMPTY,MISSING,,", nil, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || *got["PIP_INDEX_URL"] != env["PIP_INDEX_URL"] || got["EMPTY"] == nil || *got["EMPTY"] != "" || got["MISSING"] != nil {
		t.Fatalf("passthrough: %v", got)
	}
	if _, ok := got["CANARY"]; ok {
		t.Fatal("an unlisted variable was kept")
	}
	if names := strings.Join(sortedNames(got), ","); names != "EMPTY,MISSING (unset),PIP_INDEX_URL" {
		t.Fatalf("names: %s", names)
	}
	for list, want := range map[string]string{
		"GITHUB_TOKEN": "deny list", "github_token": "deny list", "MINE": "deny list", "1BAD": "not a variable name", "A-B": "not a variable name",
	} {
		if _, err := passthrough(list, []string{"mine"}, lookup); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("passthrough(%q): %v, want an error saying %q", list, err, want)
		}
	}
}

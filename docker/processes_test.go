package docker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTop(t *testing.T) {
	titles := []string{"PID", "RGID", "EGID", "SGID", "STAT"}
	got, err := parseTop(titles, [][]string{{"968", "1000", "1000", "1000", "Ss"}, {"1054", "2000000123", "2000000123", "2000000123", "Z"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{PID: 968, RGID: 1000, EGID: 1000, SGID: 1000, State: "Ss"}, {PID: 1054, RGID: 2000000123, EGID: 2000000123, SGID: 2000000123, State: "Z"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if !got[1].Zombie() || got[0].Zombie() || !got[1].HasGroup(2000000123) || got[0].HasGroup(2000000123) {
		t.Fatalf("Zombie/HasGroup wrong: %+v", got)
	}
	for name, tc := range map[string]struct {
		titles []string
		rows   [][]string
	}{
		"missing column": {[]string{"PID", "RGID"}, nil},
		"short row":      {titles, [][]string{{"1", "2"}}},
		"not a number":   {titles, [][]string{{"x", "1", "1", "1", "S"}}},
	} {
		if _, err := parseTop(tc.titles, tc.rows); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

package connlimit

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBound(t *testing.T) {
	for name, tc := range map[string]struct {
		limits   Limits
		timeWait time.Duration
		want     int
	}{
		"defaults, Linux's TIME_WAIT": {Limits{Rate: 10, Burst: 100, Max: 256}, 120 * time.Second, 1556},
		"a host with a shorter wait":  {Limits{Rate: 10, Burst: 100, Max: 256}, 30 * time.Second, 656},
		"one a second":                {Limits{Rate: 1, Burst: 20, Max: 20}, 120 * time.Second, 160},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.limits.Bound(tc.timeWait); got != tc.want {
				t.Errorf("Bound = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLimitsAndTable(t *testing.T) {
	if h, err := New("default", Limits{}, nil); h != nil || err != nil {
		t.Errorf("New with the rate 0 = %v, %v; want nil, nil (off)", h, err)
	}
	if _, err := New("default", Limits{Rate: 10}, nil); err == nil {
		t.Error("New with a rate and no burst or maximum: want an error")
	}
	for instance, want := range map[string]string{"default": "afe-default", "node-1.x_y": "afe-node-1.x_y", "": "", "a b": "", "x;flush ruleset": "", "-a": "",
		"node-" + strings.Repeat("n", 195): "afe-node-" + strings.Repeat("n", 195), strings.Repeat("n", 201): ""} {
		got, err := Table(instance)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("Table(%q) = %q, %v; want %q", instance, got, err, want)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.0/24": "10.1.2.0/24", "10.1.2.7/24": "10.1.2.0/24", "172.17.0.9": "172.17.0.9",
		"172.17.0.9/32": "172.17.0.9", "fd00::/64": "", "::1": "", "x": "", "10.1.2.0/33": "",
	} {
		got, err := Canonical(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseElements(t *testing.T) {
	out := `{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"set": {"family": "ip", "name": "nets", "table": "afe-x",
		"elem": [{"prefix": {"addr": "10.99.0.0", "len": 24}}, "10.98.0.1"]}}]}`
	got, err := parseElements([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.99.0.0/24", "10.98.0.1"}, got); diff != "" {
		t.Errorf("parseElements (-want +got):\n%s", diff)
	}
	if _, err := parseElements([]byte(`{"nftables": [{"set": {"elem": [{"range": ["10.0.0.1", "10.0.0.9"]}]}}]}`)); err == nil {
		t.Error("parseElements of a range: want an error")
	}
	if got, err := parseElements([]byte(`{"nftables": [{"set": {"name": "nets"}}]}`)); err != nil || len(got) != 0 {
		t.Errorf("parseElements of an empty set = %v, %v", got, err)
	}
}

func TestPlan(t *testing.T) {
	kept := map[string]bool{"10.0.3.0/24": true}
	for name, tc := range map[string]struct {
		have, want, add, del []string
	}{
		"empty":                   {},
		"missing ones are added":  {want: []string{"10.0.2.0/24", "10.0.1.0/24"}, add: []string{"10.0.1.0/24", "10.0.2.0/24"}},
		"left behind are deleted": {have: []string{"10.0.1.0/24", "10.0.2.0/24"}, want: []string{"10.0.2.0/24"}, del: []string{"10.0.1.0/24"}},
		"added since the mark":    {have: []string{"10.0.3.0/24"}},
		"twice in the listing":    {want: []string{"10.0.1.0/24", "10.0.1.0/24"}, add: []string{"10.0.1.0/24"}},
	} {
		t.Run(name, func(t *testing.T) {
			add, del := plan(tc.have, tc.want, func(e string) bool { return kept[e] })
			if diff := cmp.Diff(tc.add, add); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.del, del); diff != "" {
				t.Errorf("del (-want +got):\n%s", diff)
			}
		})
	}
}

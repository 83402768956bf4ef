package main

import (
	"strings"
	"testing"
	"time"
)

func TestExitCodeOf(t *testing.T) {
	tests := map[int32]int{1: 1, 7: 7, 124: 124, 255: 255, 256: 1, 512: 1, -1: 1, -256: 1}
	for code, want := range tests {
		if got := exitCodeOf(code); got != want {
			t.Errorf("exitCodeOf(%d) = %d, want %d", code, got, want)
		}
	}
}

func TestParseRunTimeout(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		"seconds, as kubectl's":           {in: "30s", want: 30 * time.Second},
		"minutes":                         {in: "5m", want: 5 * time.Minute},
		"hours and minutes":               {in: "1h30m", want: 90 * time.Minute},
		"below a second (rounded up)":     {in: "1500ms", want: 1500 * time.Millisecond},
		"the longest":                     {in: "24h", want: 24 * time.Hour},
		"a bare number is seconds":        {in: "90", want: 90 * time.Second},
		"the longest in seconds":          {in: "86400", want: 24 * time.Hour},
		"0: the sandbox's":                {in: "0", want: 0},
		"0s: the sandbox's":               {in: "0s", want: 0},
		"longer than a Run takes":         {in: "25h", wantErr: "at most 24h"},
		"longer in seconds":               {in: "86401", wantErr: "at most 24h"},
		"seconds past a Duration":         {in: "9223372036854775807", wantErr: "at most 24h"},
		"negative":                        {in: "-5s", wantErr: "not negative"},
		"negative seconds":                {in: "-1", wantErr: "not negative"},
		"a unit it does not know":         {in: "5d", wantErr: "not a duration"},
		"a number it does not take":       {in: "1e3", wantErr: "not a duration"},
		"words":                           {in: "soon", wantErr: "not a duration"},
		"empty":                           {in: "", wantErr: "not a duration"},
		"a space between number and unit": {in: "5 m", wantErr: "not a duration"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRunTimeout(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseRunTimeout(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseRunTimeout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// run's --timeout is checked as it is parsed, before anything is asked of
// the API server; a good one gets as far as connecting.
func TestRunTimeoutFlag(t *testing.T) {
	kc := kubeconfigNowhere(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"a duration":      {args: []string{"--timeout", "5m"}, want: "127.0.0.1:1"},
		"=, as kubectl's": {args: []string{"--timeout=30s"}, want: "127.0.0.1:1"},
		"a bare number":   {args: []string{"--timeout", "90"}, want: "127.0.0.1:1"},
		"0":               {args: []string{"--timeout=0"}, want: "127.0.0.1:1"},
		"not a duration":  {args: []string{"--timeout", "5d"}, want: `invalid argument "5d" for "--timeout" flag: not a duration`},
		"longer than 24h": {args: []string{"--timeout=25h"}, want: "at most 24h"},
		"negative":        {args: []string{"--timeout=-1s"}, want: "not negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--kubeconfig", kc, "--request-timeout", "2s", "run", "box"}, tc.args...)
			_, err := execute(append(args, "--", "true")...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
	out, err := execute("run", "--help")
	if err != nil || !strings.Contains(out, "--timeout duration") || !strings.Contains(out, "a bare number is seconds") {
		t.Errorf("run's help does not say what --timeout takes (%v):\n%s", err, out)
	}
}

package testenv

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitForASlowEngine(t *testing.T) {
	calls := 0
	ping := func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}
	if err := waitFor(ping, time.Second, 10*time.Millisecond); err != nil {
		t.Fatalf("an engine answering at the third ping: %v", err)
	}
}

func TestWaitForAMissingEngine(t *testing.T) {
	start := time.Now()
	err := waitFor(func(context.Context) error { return errors.New("no engine") }, 200*time.Millisecond, 20*time.Millisecond)
	if err == nil {
		t.Fatal("a missing engine answered")
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %s, want about the patience (200ms)", took)
	}
}

func TestDockerRequired(t *testing.T) {
	for name, tc := range map[string]struct {
		ci, require string
		want        bool
	}{
		"neither":   {want: false},
		"CI":        {ci: "true", want: true},
		"make test": {require: "1", want: true},
		"both":      {ci: "1", require: "1", want: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("AFE_REQUIRE_DOCKER", tc.require)
			if got := DockerRequired(); got != tc.want {
				t.Fatalf("DockerRequired() = %v, want %v", got, tc.want)
			}
		})
	}
}

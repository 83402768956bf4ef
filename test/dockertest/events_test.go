package dockertest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A container made at once after RecordEvents returns is in the record
// (the stream starts in the past, not when it opens), and so is its
// removal right before Stop (Stop waits for the stream to catch up); the
// sentinel Stop makes is not.
func TestRecordEventsMissesNothingAtEitherEnd(t *testing.T) {
	_, skip, err := Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	label := fmt.Sprintf("afe.test=events-%d", time.Now().UnixNano())
	t.Cleanup(func() { RemoveAll(label) })
	r, err := RecordEvents(label)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	out, err := exec.Command("docker", "create", "--label", label, "--network", "none", TestImage, "true").CombinedOutput()
	if err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	if out, err := exec.Command("docker", "rm", id).CombinedOutput(); err != nil {
		t.Fatalf("docker rm: %v: %s", err, out)
	}
	var actions []string
	for _, e := range r.Stop() {
		if _, ok := e.Labels[sentinelLabel]; ok {
			t.Errorf("the sentinel's event %q is in the record", e.Action)
		}
		if e.Container == id {
			actions = append(actions, e.Action)
		}
	}
	if strings.Join(actions, ",") != "create,destroy" {
		t.Fatalf("the container's events = %v, want create and destroy", actions)
	}
}

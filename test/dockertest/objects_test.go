package dockertest

import (
	"path/filepath"
	"testing"
)

// A listing the docker CLI could not make is an error, never an empty list:
// every "nothing is left" check would pass against a missing engine.
func TestObjectsFailsWithoutAnEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	got, err := Objects("afe.test=objects")
	if err == nil {
		t.Fatalf("Objects without an engine = %v, nil; want an error", got)
	}
}

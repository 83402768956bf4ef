package docker

import (
	"context"
	"testing"
	"time"
)

// An exec whose container is stopped under it ends within a few seconds
// under every runtime: under runc the engine ends its output with the
// container; under gVisor (runsc 20221219) it may leave it open for ever
// when the exec's shell has a child, and Exec watches the container.
func TestExecEndsWhenItsContainerStops(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := context.Background()
		labels := testLabels(t)
		c, err := engine.RunContainer(ctx, ContainerSpec{
			Name: uniqueName(), Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "600"},
			User: "1000:1000", PidsLimit: 1024, Runtime: runtime,
		})
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() {
			// A shell with a child: the shape of a Run's step.
			_, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"sh", "-c", "sleep 120; true"}})
			ended <- err
		}()
		time.Sleep(time.Second)
		stopped := time.Now()
		if err := engine.StopContainer(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-ended:
			t.Logf("Exec returned %s after the stop: %v", time.Since(stopped), err)
		case <-time.After(20 * time.Second):
			t.Fatal("Exec still waits 20 s after its container stopped")
		}
	})
}

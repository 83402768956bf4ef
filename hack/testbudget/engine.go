package main

import (
	"os/exec"
	"slices"
	"time"
)

// slowEngine is the time of a plain `docker run --rm` of busybox from which
// the day is a slow one: about 0.25 s on a fast day of this project's
// machine, 0.65-0.81 s on a slow one (issue 49).
const slowEngine = 450 * time.Millisecond

// engineSpeed times three plain `docker run --rm IMAGE true` and returns
// the median: the engine's speed as the suite had it.
func engineSpeed(image string) (time.Duration, error) {
	var took []time.Duration
	for range 3 {
		start := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--network", "none", image, "true").CombinedOutput(); err != nil {
			return 0, &probeError{err: err, out: string(out)}
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[1], nil
}

// probeError is a failed probe, with what docker said.
type probeError struct {
	err error
	out string
}

func (e *probeError) Error() string { return "docker run: " + e.err.Error() + ": " + e.out }

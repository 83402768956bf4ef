package main

import (
	"context"
	"slices"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// memorySettle is how long the host is left after sandboxes are removed
// before its free memory is read: the engine's shims exit and their pages
// are returned after the Sandbox is gone.
const memorySettle = 3 * time.Second

// memoryAsCountFalls deletes the idle sandboxes (names, all Ready) a
// quarter at a time from the last and, after each step, reads the host
// memory per sandbox still running against memBefore (MemAvailable before
// the first was made). It returns those points in increasing count: the
// memory per sandbox against count below len(names), without creating
// more.
func (b *bench) memoryAsCountFalls(ctx context.Context, names []string, memBefore int64) ([]memoryPoint, error) {
	var points []memoryPoint
	left := len(names)
	for _, k := range fallingCounts(left) {
		if err := b.deleteSandboxes(ctx, names[k:left]); err != nil {
			return nil, err
		}
		left = k
		time.Sleep(memorySettle)
		avail, err := memAvailable()
		if err != nil {
			return nil, err
		}
		points = append(points, memoryPoint{Count: k, PerSandbox: float64(memBefore-avail) / float64(k) / (1 << 20)})
	}
	slices.Reverse(points)
	return points, nil
}

// fallingCounts are the counts below n that the idle sandboxes are
// measured at as they are deleted: three quarters, half and a quarter of
// n, each once and above zero.
func fallingCounts(n int) []int {
	var out []int
	for _, q := range []int{3, 2, 1} {
		if k := n * q / 4; k > 0 && k < n && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// deleteSandboxes deletes the named Sandboxes, eight calls at a time, and
// waits until they are gone (their Docker objects removed before the
// controller lets them go).
func (b *bench) deleteSandboxes(ctx context.Context, names []string) error {
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return err
	}
	if err := inParallel(len(names), 8, func(i int) error {
		return b.c.Delete(ctx, b.sandboxObject(names[i], nil))
	}); err != nil {
		w.w.Stop()
		return err
	}
	_, err = w.until(ctx, 5*time.Minute, names, nil)
	return err
}

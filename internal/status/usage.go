package status

import (
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// MinUsageInterval is the least time between two writes of an object's
// status.usage.
const MinUsageInterval = 30 * time.Second

// Steps below which a change of usage is not worth a status write: an idle
// sandbox's figures wobble, and each write is an API request and a watch
// event for every client.
const (
	cpuStepMilliseconds = 1000
	memoryStepBytes     = 8 << 20
	diskStepBytes       = 1 << 20
	networkStepBytes    = 64 << 10
)

// UsageChanged is true when status.usage should be written with the
// measurement now: nothing was written yet, or the last write is at least
// MinUsageInterval old and a figure moved by at least its step (any drop
// counts: a recreated container starts from zero).
func UsageChanged(old *afev1.Usage, now afev1.Usage) bool {
	if old == nil {
		return true
	}
	if now.Time.Sub(old.Time.Time) < MinUsageInterval {
		return false
	}
	moved := func(was, is, step int64) bool { return is < was || is-was >= step }
	return moved(old.CPUMilliseconds, now.CPUMilliseconds, cpuStepMilliseconds) ||
		far(old.MemoryBytes, now.MemoryBytes, memoryStepBytes) ||
		far(old.WritableLayerBytes, now.WritableLayerBytes, diskStepBytes) ||
		far(old.WorkspaceBytes, now.WorkspaceBytes, diskStepBytes) ||
		moved(old.NetworkReceiveBytes, now.NetworkReceiveBytes, networkStepBytes) ||
		moved(old.NetworkTransmitBytes, now.NetworkTransmitBytes, networkStepBytes) ||
		moved(old.EgressBytes, now.EgressBytes, networkStepBytes) || old.EgressDenials != now.EgressDenials
}

// far is true when a and b differ by at least step, either way.
func far(a, b, step int64) bool { return a-b >= step || b-a >= step }

// SumUsage adds up the usages; its time is the latest of theirs. Nil when
// there are none.
func SumUsage(usages []afev1.Usage) *afev1.Usage {
	if len(usages) == 0 {
		return nil
	}
	sum := &afev1.Usage{}
	for _, u := range usages {
		sum.CPUMilliseconds += u.CPUMilliseconds
		sum.MemoryBytes += u.MemoryBytes
		sum.DiskBytes += u.DiskBytes
		sum.WritableLayerBytes += u.WritableLayerBytes
		sum.WorkspaceBytes += u.WorkspaceBytes
		sum.NetworkReceiveBytes += u.NetworkReceiveBytes
		sum.NetworkTransmitBytes += u.NetworkTransmitBytes
		sum.EgressBytes += u.EgressBytes
		sum.EgressDenials += u.EgressDenials
		if u.Time.After(sum.Time.Time) {
			sum.Time = u.Time
		}
	}
	return sum
}

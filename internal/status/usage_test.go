package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestUsageChanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	was := afev1.Usage{CPUMilliseconds: 5000, MemoryBytes: 100 << 20, DiskBytes: 10 << 20, WritableLayerBytes: 4 << 20,
		WorkspaceBytes: 6 << 20, NetworkReceiveBytes: 1 << 20, NetworkTransmitBytes: 1 << 20, Time: metav1.NewTime(t0)}
	later := func(d time.Duration, change func(u *afev1.Usage)) afev1.Usage {
		u := was
		u.Time = metav1.NewTime(t0.Add(d))
		change(&u)
		return u
	}
	same := func(*afev1.Usage) {}
	tests := map[string]struct {
		old  *afev1.Usage
		now  afev1.Usage
		want bool
	}{
		"first measurement":              {old: nil, now: was, want: true},
		"nothing moved":                  {old: &was, now: later(time.Minute, same), want: false},
		"cpu moved, but within 30 s":     {old: &was, now: later(29*time.Second, func(u *afev1.Usage) { u.CPUMilliseconds += 60_000 }), want: false},
		"cpu moved a second after 30 s":  {old: &was, now: later(30*time.Second, func(u *afev1.Usage) { u.CPUMilliseconds += 1000 }), want: true},
		"cpu moved less than a second":   {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.CPUMilliseconds += 999 }), want: false},
		"cpu dropped: a new container":   {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.CPUMilliseconds = 10 }), want: true},
		"memory wobbles":                 {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.MemoryBytes -= 4 << 20 }), want: false},
		"memory fell by 8 MiB":           {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.MemoryBytes -= 8 << 20 }), want: true},
		"workspace grew by 1 MiB":        {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.WorkspaceBytes += 1 << 20 }), want: true},
		"writable layer shrank by 1 MiB": {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.WritableLayerBytes -= 1 << 20 }), want: true},
		"network received 64 KiB":        {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.NetworkReceiveBytes += 64 << 10 }), want: true},
		"network sent a few bytes":       {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.NetworkTransmitBytes += 100 }), want: false},
		"network counter reset":          {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.NetworkTransmitBytes = 0 }), want: true},
		"one more egress denial":         {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.EgressDenials++ }), want: true},
		"egress of 64 KiB":               {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.EgressBytes += 64 << 10 }), want: true},
		"egress of a few bytes":          {old: &was, now: later(time.Minute, func(u *afev1.Usage) { u.EgressBytes += 100 }), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, UsageChanged(tc.old, tc.now)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestSumUsage(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Minute))
	tests := map[string]struct {
		in   []afev1.Usage
		want *afev1.Usage
	}{
		"none": {in: nil, want: nil},
		"one":  {in: []afev1.Usage{{CPUMilliseconds: 1, DiskBytes: 2, Time: t1}}, want: &afev1.Usage{CPUMilliseconds: 1, DiskBytes: 2, Time: t1}},
		"two, the latest time": {
			in: []afev1.Usage{
				{CPUMilliseconds: 1, MemoryBytes: 2, DiskBytes: 7, WritableLayerBytes: 3, WorkspaceBytes: 4, NetworkReceiveBytes: 5, NetworkTransmitBytes: 6,
					EgressBytes: 8, EgressDenials: 9, Time: t2},
				{CPUMilliseconds: 10, MemoryBytes: 20, DiskBytes: 70, WritableLayerBytes: 30, WorkspaceBytes: 40, NetworkReceiveBytes: 50, NetworkTransmitBytes: 60,
					EgressBytes: 80, EgressDenials: 90, Time: t1},
			},
			want: &afev1.Usage{CPUMilliseconds: 11, MemoryBytes: 22, DiskBytes: 77, WritableLayerBytes: 33, WorkspaceBytes: 44,
				NetworkReceiveBytes: 55, NetworkTransmitBytes: 66, EgressBytes: 88, EgressDenials: 99, Time: t2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SumUsage(tc.in)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

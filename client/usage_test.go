package client

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func sandboxWith(ns, name, ticket string, u *afev1.Usage) *afev1.Sandbox {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	sbx.Status.Usage = u
	return sbx
}

func TestSandboxUsage(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	tests := map[string]struct {
		sbx  *afev1.Sandbox
		want UsageRow
	}{
		"not measured yet": {
			sbx:  sandboxWith("a", "box", "", nil),
			want: UsageRow{Namespace: "a", Name: "box", Sandboxes: 1},
		},
		"a ticket's sandbox": {
			sbx: sandboxWith("a", "t1-main", "t1", &afev1.Usage{CPUMilliseconds: 1500, MemoryBytes: 2 << 20, DiskBytes: 30,
				WritableLayerBytes: 10, WorkspaceBytes: 20, NetworkReceiveBytes: 5, NetworkTransmitBytes: 7, Time: t0}),
			want: UsageRow{Namespace: "a", Name: "t1-main", Ticket: "t1", Sandboxes: 1, Measured: 1,
				Usage: afev1.Usage{CPUMilliseconds: 1500, MemoryBytes: 2 << 20, DiskBytes: 30,
					WritableLayerBytes: 10, WorkspaceBytes: 20, NetworkReceiveBytes: 5, NetworkTransmitBytes: 7, Time: t0}},
		},
		"negative figures count as zero, no time is none": {
			sbx:  sandboxWith("a", "box", "", &afev1.Usage{CPUMilliseconds: -5, MemoryBytes: math.MinInt64, DiskBytes: 3}),
			want: UsageRow{Namespace: "a", Name: "box", Sandboxes: 1, Measured: 1, Usage: afev1.Usage{DiskBytes: 3}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SandboxUsage(tc.sbx)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestAggregateUsage(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	rows := []UsageRow{
		SandboxUsage(sandboxWith("b", "t1", "t1", &afev1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64, Time: t1})),
		SandboxUsage(sandboxWith("a", "t1-x", "t1", &afev1.Usage{CPUMilliseconds: 100, MemoryBytes: 10, NetworkReceiveBytes: 1, Time: t1})),
		SandboxUsage(sandboxWith("a", "t1-y", "t1", &afev1.Usage{CPUMilliseconds: 200, MemoryBytes: 20, NetworkTransmitBytes: 2, Time: t0})),
		SandboxUsage(sandboxWith("a", "t1-z", "t1", nil)),
		SandboxUsage(sandboxWith("a", "solo", "", &afev1.Usage{CPUMilliseconds: 5, Time: t1})),
		SandboxUsage(sandboxWith("b", "big", "", &afev1.Usage{MemoryBytes: math.MaxInt64, Time: t1})),
	}
	tests := map[string]struct {
		by   UsageBy
		want []UsageRow
	}{
		"per ticket, a ticketless sandbox its own, by namespace and name": {by: ByTicket, want: []UsageRow{
			{Namespace: "a", Name: "solo", Sandboxes: 1, Measured: 1, Usage: afev1.Usage{CPUMilliseconds: 5, Time: t1}},
			{Namespace: "a", Name: "t1", Sandboxes: 3, Measured: 2,
				Usage: afev1.Usage{CPUMilliseconds: 300, MemoryBytes: 30, NetworkReceiveBytes: 1, NetworkTransmitBytes: 2, Time: t0}},
			{Namespace: "b", Name: "big", Sandboxes: 1, Measured: 1, Usage: afev1.Usage{MemoryBytes: math.MaxInt64, Time: t1}},
			{Namespace: "b", Name: "t1", Sandboxes: 1, Measured: 1, Usage: afev1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64, Time: t1}},
		}},
		"per namespace, saturating": {by: ByNamespace, want: []UsageRow{
			{Namespace: "a", Name: "a", Sandboxes: 4, Measured: 3,
				Usage: afev1.Usage{CPUMilliseconds: 305, MemoryBytes: 30, NetworkReceiveBytes: 1, NetworkTransmitBytes: 2, Time: t0}},
			{Namespace: "b", Name: "b", Sandboxes: 2, Measured: 2, Usage: afev1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64, Time: t1}},
		}},
		"per sandbox: as they are": {by: BySandbox, want: rows},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AggregateUsage(rows, tc.by)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestSortUsage(t *testing.T) {
	rows := []UsageRow{
		{Namespace: "b", Name: "x",
			Usage: afev1.Usage{CPUMilliseconds: 10, MemoryBytes: 1, DiskBytes: 3, NetworkReceiveBytes: math.MaxInt64, NetworkTransmitBytes: 1}},
		{Namespace: "a", Name: "y",
			Usage: afev1.Usage{CPUMilliseconds: 30, MemoryBytes: 2, DiskBytes: 1, NetworkReceiveBytes: 5, NetworkTransmitBytes: 5}},
		{Namespace: "a", Name: "x", Usage: afev1.Usage{CPUMilliseconds: 10, MemoryBytes: 3, DiskBytes: 2, NetworkTransmitBytes: 20}},
	}
	tests := map[UsageSort][]string{
		SortByName:    {"a/x", "a/y", "b/x"},
		SortByCPU:     {"a/y", "a/x", "b/x"},
		SortByMemory:  {"a/x", "a/y", "b/x"},
		SortByDisk:    {"b/x", "a/x", "a/y"},
		SortByNetwork: {"b/x", "a/x", "a/y"},
	}
	for by, want := range tests {
		t.Run(string(by), func(t *testing.T) {
			sorted := append([]UsageRow{}, rows...)
			SortUsage(sorted, by)
			var got []string
			for _, r := range sorted {
				got = append(got, r.Namespace+"/"+r.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestTopOptions(t *testing.T) {
	tests := map[string]struct {
		opts    TopOptions
		invalid bool
	}{
		"defaults":        {opts: TopOptions{}},
		"every option":    {opts: TopOptions{By: ByTicket, SortBy: SortByNetwork, Selector: "team=a,tier!=ci", AllNamespaces: true}},
		"an unknown by":   {opts: TopOptions{By: "pod"}, invalid: true},
		"an unknown sort": {opts: TopOptions{SortBy: "cores"}, invalid: true},
		"a bad selector":  {opts: TopOptions{Selector: "a=b=c"}, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := tc.opts.parse()
			if IsInvalid(err) != tc.invalid || (err != nil && !tc.invalid) {
				t.Errorf("invalid %v, got %v", tc.invalid, err)
			}
		})
	}
}

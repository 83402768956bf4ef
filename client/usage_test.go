package client

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// sandboxWith is a Sandbox of UID uid-NAME and, when u is set, its figures
// measured at t as that Sandbox.
func sandboxWith(ns, name, ticket string, u *accessv1.Usage, t metav1.Time) (*afev1.Sandbox, *accessv1.SandboxUsage) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	if u == nil {
		return sbx, nil
	}
	return sbx, &accessv1.SandboxUsage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: sbx.UID}, Usage: *u, Timestamp: t}
}

// rowWith is the row of sandboxWith.
func rowWith(ns, name, ticket string, u *accessv1.Usage, t metav1.Time) UsageRow {
	return UsageRowOf(sandboxWith(ns, name, ticket, u, t))
}

func TestUsageRowOf(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	figures := accessv1.Usage{CPUMilliseconds: 1500, MemoryBytes: 2 << 20, DiskBytes: 30,
		WritableLayerBytes: 10, WorkspaceBytes: 20, NetworkReceiveBytes: 5, NetworkTransmitBytes: 7}
	box, _ := sandboxWith("a", "box", "", nil, t0)
	_, before := sandboxWith("a", "box", "", &figures, t0)
	before.UID = "uid-of-the-box-before"
	ticketed, ticketedUsage := sandboxWith("a", "t1-main", "t1", &figures, t0)
	negative, negativeUsage := sandboxWith("a", "neg", "", &accessv1.Usage{CPUMilliseconds: -5, MemoryBytes: math.MinInt64, DiskBytes: 3}, metav1.Time{})
	tests := map[string]struct {
		sbx      *afev1.Sandbox
		measured *accessv1.SandboxUsage
		want     UsageRow
	}{
		"not measured yet": {
			sbx:  box,
			want: UsageRow{Namespace: "a", Name: "box", Sandboxes: 1},
		},
		"measured as another Sandbox of its name": {
			sbx: box, measured: before,
			want: UsageRow{Namespace: "a", Name: "box", Sandboxes: 1},
		},
		"a ticket's sandbox": {
			sbx: ticketed, measured: ticketedUsage,
			want: UsageRow{Namespace: "a", Name: "t1-main", Ticket: "t1", Sandboxes: 1, Measured: 1, Usage: figures, Time: t0},
		},
		"negative figures count as zero, no time is none": {
			sbx: negative, measured: negativeUsage,
			want: UsageRow{Namespace: "a", Name: "neg", Sandboxes: 1, Measured: 1, Usage: accessv1.Usage{DiskBytes: 3}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, UsageRowOf(tc.sbx, tc.measured)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestAggregateUsage(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	rows := []UsageRow{
		rowWith("b", "t1", "t1", &accessv1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64}, t1),
		rowWith("a", "t1-x", "t1", &accessv1.Usage{CPUMilliseconds: 100, MemoryBytes: 10, NetworkReceiveBytes: 1}, t1),
		rowWith("a", "t1-y", "t1", &accessv1.Usage{CPUMilliseconds: 200, MemoryBytes: 20, NetworkTransmitBytes: 2}, t0),
		rowWith("a", "t1-z", "t1", nil, t0),
		rowWith("a", "solo", "", &accessv1.Usage{CPUMilliseconds: 5}, t1),
		rowWith("b", "big", "", &accessv1.Usage{MemoryBytes: math.MaxInt64}, t1),
	}
	tests := map[string]struct {
		by   UsageBy
		want []UsageRow
	}{
		"per ticket, a ticketless sandbox its own, by namespace and name": {by: ByTicket, want: []UsageRow{
			{Namespace: "a", Name: "solo", Sandboxes: 1, Measured: 1, Usage: accessv1.Usage{CPUMilliseconds: 5}, Time: t1},
			{Namespace: "a", Name: "t1", Sandboxes: 3, Measured: 2,
				Usage: accessv1.Usage{CPUMilliseconds: 300, MemoryBytes: 30, NetworkReceiveBytes: 1, NetworkTransmitBytes: 2}, Time: t0},
			{Namespace: "b", Name: "big", Sandboxes: 1, Measured: 1, Usage: accessv1.Usage{MemoryBytes: math.MaxInt64}, Time: t1},
			{Namespace: "b", Name: "t1", Sandboxes: 1, Measured: 1, Usage: accessv1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64}, Time: t1},
		}},
		"per namespace, saturating": {by: ByNamespace, want: []UsageRow{
			{Namespace: "a", Name: "a", Sandboxes: 4, Measured: 3,
				Usage: accessv1.Usage{CPUMilliseconds: 305, MemoryBytes: 30, NetworkReceiveBytes: 1, NetworkTransmitBytes: 2}, Time: t0},
			{Namespace: "b", Name: "b", Sandboxes: 2, Measured: 2, Usage: accessv1.Usage{CPUMilliseconds: 1, MemoryBytes: math.MaxInt64}, Time: t1},
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
			Usage: accessv1.Usage{CPUMilliseconds: 10, MemoryBytes: 1, DiskBytes: 3, NetworkReceiveBytes: math.MaxInt64, NetworkTransmitBytes: 1}},
		{Namespace: "a", Name: "y",
			Usage: accessv1.Usage{CPUMilliseconds: 30, MemoryBytes: 2, DiskBytes: 1, NetworkReceiveBytes: 5, NetworkTransmitBytes: 5}},
		{Namespace: "a", Name: "x", Usage: accessv1.Usage{CPUMilliseconds: 10, MemoryBytes: 3, DiskBytes: 2, NetworkTransmitBytes: 20}},
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

package client

import (
	"cmp"
	"math"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// UsageBy is what one UsageRow stands for.
type UsageBy string

// The levels of UsageRow.
const (
	// BySandbox: a row per Sandbox.
	BySandbox UsageBy = "sandbox"
	// ByTicket: a row per ticket, the sum of its Sandboxes. The ticket of
	// a Sandbox without spec.ticketRef is the Sandbox itself, as in the
	// afe.ticket label and the afe_ticket_* metrics.
	ByTicket UsageBy = "ticket"
	// ByNamespace: a row per namespace, the sum of its Sandboxes.
	ByNamespace UsageBy = "namespace"
)

// UsageSort is the figure rows are sorted by, largest first.
type UsageSort string

// The sort orders of Top. Rows that tie, and every row with SortByName,
// are in the order of namespace and name.
const (
	SortByName    UsageSort = "name"
	SortByCPU     UsageSort = "cpu"
	SortByMemory  UsageSort = "memory"
	SortByDisk    UsageSort = "disk"
	SortByNetwork UsageSort = "network"
)

// UsageRow is the usage of a Sandbox, or the sum of the Sandboxes of a
// ticket or a namespace, as the manager measured them (the access API's
// sandboxusages). A negative figure counts as zero and a sum stops at
// math.MaxInt64.
type UsageRow struct {
	// Namespace of the Sandbox, the ticket or the namespace itself.
	Namespace string `json:"namespace"`
	// Name of the Sandbox, the ticket, or the namespace.
	Name string `json:"name"`
	// Ticket is, on a sandbox's row, its ticket: empty without one (its
	// sum ByTicket is then a row of its own, named after the Sandbox).
	Ticket string `json:"ticket,omitempty"`
	// Sandboxes is the number of Sandboxes the row adds up (1 for one).
	Sandboxes int `json:"sandboxes"`
	// Measured is how many of them have figures.
	Measured int `json:"measured"`
	// Usage is the figures, as a SandboxUsage names them. CPU time and
	// network bytes count from the start of each container: cumulative,
	// not rates.
	accessv1.Usage `json:",inline"`
	// Time is when the figures were measured; for a sum, the oldest
	// measurement in it (every figure is at least that recent); zero when
	// nothing was measured.
	Time metav1.Time `json:"time"`
}

// NetworkBytes is the bytes received and sent.
func (r *UsageRow) NetworkBytes() int64 {
	return addSat(r.NetworkReceiveBytes, r.NetworkTransmitBytes)
}

// UsageRowOf is the row of one Sandbox, with the figures measured of it:
// none when measured is nil or of another Sandbox that had its name (its
// UID differs).
func UsageRowOf(sbx *afev1.Sandbox, measured *accessv1.SandboxUsage) UsageRow {
	row := UsageRow{Namespace: sbx.Namespace, Name: sbx.Name, Sandboxes: 1}
	if sbx.Spec.TicketRef != nil {
		row.Ticket = sbx.Spec.TicketRef.Name
	}
	if measured == nil || measured.UID != sbx.UID {
		return row
	}
	row.add(&UsageRow{Measured: 1, Usage: measured.Usage, Time: measured.Timestamp})
	return row
}

// AggregateUsage sums rows of Sandboxes per ticket or per namespace, in the
// order of namespace and name; BySandbox returns them as they are.
func AggregateUsage(rows []UsageRow, by UsageBy) []UsageRow {
	if by != ByTicket && by != ByNamespace {
		return rows
	}
	type key struct{ namespace, name string }
	sums := map[key]*UsageRow{}
	for i := range rows {
		k := key{rows[i].Namespace, cmp.Or(rows[i].Ticket, rows[i].Name)}
		if by == ByNamespace {
			k.name = rows[i].Namespace
		}
		sum := sums[k]
		if sum == nil {
			sum = &UsageRow{Namespace: k.namespace, Name: k.name}
			sums[k] = sum
		}
		sum.add(&rows[i])
	}
	out := make([]UsageRow, 0, len(sums))
	for _, sum := range sums {
		out = append(out, *sum)
	}
	SortUsage(out, SortByName)
	return out
}

// add adds o's counts and figures to r, saturating, and keeps the older
// measurement time.
func (r *UsageRow) add(o *UsageRow) {
	r.Sandboxes = addCount(r.Sandboxes, o.Sandboxes)
	r.Measured = addCount(r.Measured, o.Measured)
	r.CPUMilliseconds = addSat(r.CPUMilliseconds, o.CPUMilliseconds)
	r.MemoryBytes = addSat(r.MemoryBytes, o.MemoryBytes)
	r.DiskBytes = addSat(r.DiskBytes, o.DiskBytes)
	r.WritableLayerBytes = addSat(r.WritableLayerBytes, o.WritableLayerBytes)
	r.WorkspaceBytes = addSat(r.WorkspaceBytes, o.WorkspaceBytes)
	r.NetworkReceiveBytes = addSat(r.NetworkReceiveBytes, o.NetworkReceiveBytes)
	r.NetworkTransmitBytes = addSat(r.NetworkTransmitBytes, o.NetworkTransmitBytes)
	if !o.Time.IsZero() && (r.Time.IsZero() || o.Time.Before(&r.Time)) {
		r.Time = o.Time
	}
}

// SortUsage sorts rows by the figure, largest first, then by namespace
// and name; SortByName (or any other value) by namespace and name alone.
func SortUsage(rows []UsageRow, by UsageSort) {
	figure := func(*UsageRow) int64 { return 0 }
	switch by {
	case SortByCPU:
		figure = func(r *UsageRow) int64 { return r.CPUMilliseconds }
	case SortByMemory:
		figure = func(r *UsageRow) int64 { return r.MemoryBytes }
	case SortByDisk:
		figure = func(r *UsageRow) int64 { return r.DiskBytes }
	case SortByNetwork:
		figure = (*UsageRow).NetworkBytes
	}
	slices.SortStableFunc(rows, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(figure(&b), figure(&a)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// addSat is a+b of two figures, a negative one counting as zero, stopping
// at math.MaxInt64.
func addSat(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// addCount is a+b of two counts, stopping at math.MaxInt.
func addCount(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

package client

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// topPageSize is how many Sandboxes one list request of Top asks for.
const topPageSize = 500

// TopOptions selects and shapes what Top reports.
type TopOptions struct {
	// AllNamespaces reads the Sandboxes of every namespace, not only the
	// Client's (it needs list on sandboxes cluster-wide).
	AllNamespaces bool
	// Selector is a label selector on the Sandboxes ("team=a,tier!=ci").
	Selector string
	// By is a row per sandbox (default), ticket or namespace.
	By UsageBy
	// SortBy orders the rows (default SortByName).
	SortBy UsageSort
}

// Top is what the selected Sandboxes use, from their status.usage read
// through the Kubernetes API with the Client's identity (no access to the
// engine): a row per sandbox, or their sums per ticket or per namespace,
// sorted. The figures are the controller's reports and anyone who may
// write a Sandbox's status may change them: they are for display, never
// for a decision (billing, quotas). A bad option is an Invalid error; a
// namespace the caller may not list, a Forbidden one.
func (c *Client) Top(ctx context.Context, opts TopOptions) ([]UsageRow, error) {
	by, sortBy, sel, err := opts.parse()
	if err != nil {
		return nil, err
	}
	listOpts := []ctrlclient.ListOption{ctrlclient.MatchingLabelsSelector{Selector: sel}, ctrlclient.Limit(topPageSize)}
	where := "namespace " + c.namespace
	if opts.AllNamespaces {
		where = "all namespaces"
	} else {
		listOpts = append(listOpts, ctrlclient.InNamespace(c.namespace))
	}
	var rows []UsageRow
	for cont := ""; ; {
		list := &afev1.SandboxList{}
		if err := c.kube.List(ctx, list, append(listOpts, ctrlclient.Continue(cont))...); err != nil {
			return nil, wrap(err, "list sandboxes in %s", where)
		}
		for i := range list.Items {
			rows = append(rows, SandboxUsage(&list.Items[i]))
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	rows = AggregateUsage(rows, by)
	SortUsage(rows, sortBy)
	return rows, nil
}

// parse checks the options and fills in the defaults.
func (o TopOptions) parse() (UsageBy, UsageSort, labels.Selector, error) {
	by, sortBy := o.By, o.SortBy
	if by == "" {
		by = BySandbox
	}
	if sortBy == "" {
		sortBy = SortByName
	}
	switch {
	case by != BySandbox && by != ByTicket && by != ByNamespace:
		return "", "", nil, invalid("top: by %q: want sandbox, ticket or namespace", o.By)
	case sortBy != SortByName && sortBy != SortByCPU && sortBy != SortByMemory && sortBy != SortByDisk && sortBy != SortByNetwork:
		return "", "", nil, invalid("top: sort by %q: want cpu, memory, disk, network or name", o.SortBy)
	}
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return "", "", nil, invalid("top: selector %q: %v", o.Selector, err)
	}
	return by, sortBy, sel, nil
}

// invalid is an Invalid error of a caller's argument.
func invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, args...)}
}

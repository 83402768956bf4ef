package client

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
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

// Top is what the selected Sandboxes use, as their managers measured it,
// read through the access API with the Client's identity (no access to
// the engine): a row per sandbox, or their sums per ticket or per
// namespace, sorted. It takes one list of the Sandboxes (a page per 500)
// and one list of sandboxusages, however many sandboxes there are. A
// Sandbox not measured yet (not running, or started since its manager's
// last measurement) has a row without figures. A bad option is an Invalid
// error; a namespace the caller may not list, a Forbidden one.
func (c *Client) Top(ctx context.Context, opts TopOptions) ([]UsageRow, error) {
	by, sortBy, sel, err := opts.parse()
	if err != nil {
		return nil, err
	}
	// Every figure of the namespace: the selector is applied to the
	// Sandboxes as they are now, not as they were at the measurement.
	measured, err := c.Usages(ctx, opts.AllNamespaces, "")
	if err != nil {
		return nil, err
	}
	byKey := make(map[types.NamespacedName]*accessv1.SandboxUsage, len(measured.Items))
	for i := range measured.Items {
		it := &measured.Items[i]
		byKey[types.NamespacedName{Namespace: it.Namespace, Name: it.Name}] = it
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
			sbx := &list.Items[i]
			rows = append(rows, UsageRowOf(sbx, byKey[ctrlclient.ObjectKeyFromObject(sbx)]))
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	rows = AggregateUsage(rows, by)
	SortUsage(rows, sortBy)
	return rows, nil
}

// Usage is what the sandbox uses, as its manager last measured it (the
// access API's sandboxusages/NAME, from the manager's memory). A sandbox
// not measured yet is an error IsNotFound with reason UsageNotMeasured;
// one that does not exist, reason SandboxNotFound.
func (c *Client) Usage(ctx context.Context, sandbox string) (*accessv1.SandboxUsage, error) {
	raw, err := rawOf(c.access.Get().Namespace(c.namespace).Resource(accessv1.ResourceSandboxUsages).Name(sandbox).Do(ctx))
	if err != nil {
		return nil, wrap(err, "the usage of sandbox %s", sandbox)
	}
	item := &accessv1.SandboxUsage{}
	if err := json.Unmarshal(raw, item); err != nil {
		return nil, fmt.Errorf("read the usage of sandbox %s: %w", sandbox, err)
	}
	return item, nil
}

// Usages is what the measured sandboxes of the Client's namespace (of
// every namespace with allNamespaces, which needs list on sandboxusages
// cluster-wide) use, those whose labels match selector (empty: all), in
// one request: the access API's list of sandboxusages. In per-node mode
// its Unanswered names the nodes whose manager did not answer: their
// sandboxes are missing.
func (c *Client) Usages(ctx context.Context, allNamespaces bool, selector string) (*accessv1.SandboxUsageList, error) {
	req := c.access.Get().Resource(accessv1.ResourceSandboxUsages)
	where := "all namespaces"
	if !allNamespaces {
		req, where = req.Namespace(c.namespace), "namespace "+c.namespace
	}
	if selector != "" {
		req = req.Param(accessv1.ParamLabelSelector, selector)
	}
	raw, err := rawOf(req.Do(ctx))
	if err != nil {
		return nil, wrap(err, "list the usage of sandboxes in %s", where)
	}
	list := &accessv1.SandboxUsageList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("read the usage of sandboxes in %s: %w", where, err)
	}
	if list.Kind != accessv1.SandboxUsageListKind {
		return nil, fmt.Errorf("read the usage of sandboxes in %s: the answer is a %q, not a %s", where, list.Kind, accessv1.SandboxUsageListKind)
	}
	return list, nil
}

// rawOf is the body of a result, or its error with the Status the access
// API answered (Raw alone gives client-go's generic error of the code,
// without the Status's reason).
func rawOf(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
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

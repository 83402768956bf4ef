package client

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/egress"
)

// CreateSandbox creates a Sandbox named name from the options and waits,
// bounded by ctx, until it is Ready (see WaitSandboxReady).
func (c *Client) CreateSandbox(ctx context.Context, name string, opts ...SandboxOption) (*afev1.Sandbox, error) {
	sbx := &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name},
		Spec:       afev1.SandboxSpec{SandboxTemplateSpec: templateOf(opts)},
	}
	if err := checkEgress(sbx.Spec.Egress); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", name, err)
	}
	if err := c.kube.Create(ctx, sbx); err != nil {
		return nil, wrap(err, "create sandbox %s", name)
	}
	return c.WaitSandboxReady(ctx, name)
}

// CreateTicket creates a Ticket named name whose sandbox is made from the
// options, and waits, bounded by ctx, until the ticket is Ready. Its
// sandbox (with the default Volume workspace) is named like the ticket.
func (c *Client) CreateTicket(ctx context.Context, name string, opts ...SandboxOption) (*afev1.Ticket, error) {
	tk := &afev1.Ticket{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name},
		Spec:       afev1.TicketSpec{Sandbox: templateOf(opts)},
	}
	if err := checkEgress(tk.Spec.Sandbox.Egress); err != nil {
		return nil, fmt.Errorf("create ticket %s: %w", name, err)
	}
	if err := c.kube.Create(ctx, tk); err != nil {
		return nil, wrap(err, "create ticket %s", name)
	}
	return c.WaitTicketReady(ctx, name)
}

// WaitSandboxReady watches the Sandbox until its Ready condition is true.
// A Failed sandbox is an error (IsFailed) with the condition's reason; the
// end of ctx first is a TimedOut error with the reason it was not Ready.
func (c *Client) WaitSandboxReady(ctx context.Context, name string) (*afev1.Sandbox, error) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name}}
	err := c.waitFor(ctx, sbx, &afev1.SandboxList{}, func() (bool, error) {
		return readiness(sbx.Status.Conditions, afev1.SandboxReadyCondition, sbx.Status.Phase == afev1.SandboxFailed, "sandbox", name)
	})
	return sbx, notReadyWithin(err, sbx.Status.Conditions, afev1.SandboxReadyCondition, "sandbox", name)
}

// WaitTicketReady watches the Ticket until its Ready condition is true. A
// finished ticket is an error (IsFailed) with the condition's reason.
func (c *Client) WaitTicketReady(ctx context.Context, name string) (*afev1.Ticket, error) {
	tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name}}
	err := c.waitFor(ctx, tk, &afev1.TicketList{}, func() (bool, error) {
		return readiness(tk.Status.Conditions, afev1.TicketReadyCondition, tk.Status.Phase == afev1.TicketFinished, "ticket", name)
	})
	return tk, notReadyWithin(err, tk.Status.Conditions, afev1.TicketReadyCondition, "ticket", name)
}

// readiness is whether the Ready condition is true, or an error when the
// object failed.
func readiness(conds []metav1.Condition, ready string, failed bool, kind, name string) (bool, error) {
	cond := meta.FindStatusCondition(conds, ready)
	if cond != nil && cond.Status == metav1.ConditionTrue {
		return true, nil
	}
	if failed {
		e := &Error{Kind: KindFailed, Message: fmt.Sprintf("%s %s failed", kind, name)}
		if cond != nil {
			e.Reason, e.Message = cond.Reason, e.Message+": "+cond.Message
		}
		return false, e
	}
	return false, nil
}

// notReadyWithin gives a wait that ran out of time the reason the object
// was not Ready.
func notReadyWithin(err error, conds []metav1.Condition, ready, kind, name string) error {
	if !IsTimedOut(err) {
		return err
	}
	e := &Error{Kind: KindTimedOut, Message: fmt.Sprintf("%s %s was not Ready in time", kind, name), Err: err}
	if cond := meta.FindStatusCondition(conds, ready); cond != nil {
		e.Reason, e.Message = cond.Reason, e.Message+": "+cond.Message
	}
	return e
}

// DestroySandbox deletes the Sandbox and waits until it is gone (its
// container, proxy, network and workspace removed). A sandbox already gone
// is no error: Destroy may be called any number of times. A ticket's
// sandbox goes with its ticket (DestroyTicket): the ticket would make it
// again.
func (c *Client) DestroySandbox(ctx context.Context, name string) error {
	return c.destroy(ctx, &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name}}, &afev1.SandboxList{})
}

// DestroyTicket deletes the Ticket and waits until it is gone with all
// its sandboxes. A ticket already gone is no error.
func (c *Client) DestroyTicket(ctx context.Context, name string) error {
	return c.destroy(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name}}, &afev1.TicketList{})
}

// destroy deletes obj and watches it until it is gone. The controller's
// finalizer removes what it made; a Ticket's controller removes its
// Sandboxes (background propagation: foreground would wait on a garbage
// collector a bare control plane may not run).
func (c *Client) destroy(ctx context.Context, obj ctrlclient.Object, list ctrlclient.ObjectList) error {
	err := c.kube.Delete(ctx, obj, ctrlclient.PropagationPolicy(metav1.DeletePropagationBackground))
	if err == nil {
		err = c.waitFor(ctx, obj, list, func() (bool, error) { return false, nil })
	}
	err = wrap(err, "destroy %s %s", kindName(obj), obj.GetName())
	if IsNotFound(err) {
		return nil
	}
	return err
}

// checkEgress refuses, before any request, an egress entry the proxy's
// renderer (internal/egress) would refuse: the API server refuses it too,
// with a message about the CRD's pattern rather than the entry.
func checkEgress(hosts []afev1.EgressHost) error {
	for _, h := range hosts {
		if _, err := egress.ParseHost(string(h)); err != nil {
			return err
		}
	}
	return nil
}

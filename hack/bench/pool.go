package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// poolSandboxes: one Sandbox taken from a warm pool, creation to Ready as
// a watch sees it, against the CLI making the same objects; the same with
// egress. Then a miss: a Sandbox naming a pool with no ready member,
// against a cold one, both seen the same way; then the burst of tickets, a
// user's kubectl and the memory of idle members.
func (b *bench) poolSandboxes(ctx context.Context) ([]row, error) {
	var rows []row
	for _, scenario := range []func(context.Context) ([]row, error){
		func(ctx context.Context) ([]row, error) {
			return b.warmSandboxes(ctx, fmt.Sprintf("One Sandbox from a warm pool, creation to Ready (%d reps)", b.cfg.Reps),
				"warm", nil, b.cfg.Reps)
		},
		func(ctx context.Context) ([]row, error) {
			return b.warmSandboxes(ctx, fmt.Sprintf("One Sandbox with egress from a warm pool, creation to Ready (%d reps)", b.cfg.EgressReps),
				"warm-egress", []afev1.EgressHost{"example.com"}, b.cfg.EgressReps)
		},
		// The miss follows with no other pool of its shape: an unnamed
		// Sandbox would take the members of this one.
		b.poolMiss,
		b.poolTickets,
		b.poolKubectl,
		func(ctx context.Context) ([]row, error) { return b.poolMemory(ctx, b.cfg.PoolTickets) },
	} {
		more, err := scenario(ctx)
		rows = append(rows, more...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// warmSandboxes: Sandboxes taken one after the other from a pool of two
// (refilled before each rep, so every one is warm), each against the CLI
// making the same objects (its volume and container; with egress its
// network and proxy too). The pool is gone when it returns.
func (b *bench) warmSandboxes(ctx context.Context, title, name string, egress []afev1.EgressHost, reps int) ([]row, error) {
	b.logf("%s", title)
	p, err := b.createPool(ctx, name, 2, b.sandboxObject("", egress).Spec.SandboxTemplateSpec)
	if err != nil {
		return nil, err
	}
	var warm, baseline sample
	for i := range reps {
		tag := fmt.Sprintf("%s-%d", name, i)
		sbx, d, err := b.claimWarm(ctx, p, b.sandboxObject(tag, egress))
		if err != nil {
			return nil, joinErr(err, b.deletePool(ctx, p))
		}
		warm = append(warm, d)
		cli, err := b.twinThenRemove(ctx, sbx, tag)
		if err != nil {
			return nil, joinErr(err, b.deletePool(ctx, p))
		}
		baseline = append(baseline, cli)
	}
	return []row{timing(title, warm, baseline, "sequential")}, b.deletePool(ctx, p)
}

// poolTickets: N Tickets created at once from a pool of N ready members,
// until all Ready, against the plain script making N sandboxes with the
// CLI, -parallel at a time.
func (b *bench) poolTickets(ctx context.Context) ([]row, error) {
	n := b.cfg.PoolTickets
	title := fmt.Sprintf("%d Tickets created at once from a pool of %d, until all Ready", n, n)
	b.logf("%s", title)
	p, err := b.createPool(ctx, "burst", int32(n), b.sandboxObject("", nil).Spec.SandboxTemplateSpec)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.deletePool(ctx, p) }()
	if err := b.waitPoolReady(ctx, p, int32(n)); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("pooled-ticket-%d", i)
	}
	w, err := b.watch(ctx, &afev1.TicketList{})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := inParallel(n, 8, func(i int) error {
		tmpl := b.sandboxObject("", nil).Spec.SandboxTemplateSpec
		tmpl.PoolRef = &afev1.PoolReference{Name: p.Name}
		return b.c.Create(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns},
			Spec: afev1.TicketSpec{Sandbox: tmpl}})
	}); err != nil {
		w.w.Stop()
		return nil, err
	}
	seen, err := w.until(ctx, 5*time.Minute, names, ticketReady)
	if err != nil {
		return nil, err
	}
	created := latest(seen).Sub(start)
	warm := 0
	var sbx afev1.Sandbox
	for _, name := range names {
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, &sbx); err != nil {
			return nil, err
		}
		if sbx.Status.Pool == p.Name {
			warm++
		}
	}
	twins := make([]cliSandbox, n)
	for i := range twins {
		if twins[i], err = b.cliTwin(ctx, &sbx, fmt.Sprintf("burst-%d", i)); err != nil {
			return nil, err
		}
	}
	parCreate, err := timed(func() error { return inParallel(n, b.cfg.Parallel, func(i int) error { return twins[i].create(ctx) }) })
	if err != nil {
		return nil, err
	}
	err = inParallel(n, b.cfg.Parallel, func(i int) error { return twins[i].remove(ctx) })
	for _, name := range names {
		err = joinErr(err, client.IgnoreNotFound(b.c.Delete(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns}})))
	}
	if err != nil {
		return nil, err
	}
	if err := b.waitNoTickets(ctx, names); err != nil {
		return nil, err
	}
	return []row{{
		Scenario:   fmt.Sprintf("%s (%d of them warm)", title, warm),
		Controller: seconds(created),
		Baseline:   fmt.Sprintf("%d-parallel %s", b.cfg.Parallel, seconds(parCreate)),
		Ratio:      ratio(created, parCreate),
	}}, nil
}

// waitNoTickets waits until the Tickets are gone (their sandboxes removed).
func (b *bench) waitNoTickets(ctx context.Context, names []string) error {
	return waitFor(ctx, 2*time.Minute, func() error {
		for _, name := range names {
			err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, &afev1.Ticket{})
			if err == nil {
				return fmt.Errorf("ticket %s is still there", name)
			}
			if client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil
	})
}

// poolMiss: a Sandbox naming an empty pool is created cold; against a
// Sandbox that names none, alternately.
func (b *bench) poolMiss(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("A miss (its pool empty) against a cold Sandbox, creation to Ready (%d reps)", b.cfg.Reps)
	b.logf("%s", title)
	p, err := b.createPool(ctx, "empty", 0, b.sandboxObject("", nil).Spec.SandboxTemplateSpec)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.deletePool(ctx, p) }()
	var missed, cold sample
	for i := range b.cfg.Reps {
		for _, named := range []bool{true, false} {
			sbx := b.sandboxObject(fmt.Sprintf("miss-%d-%t", i, named), nil)
			if named {
				sbx.Spec.PoolRef = &afev1.PoolReference{Name: p.Name}
			}
			sbx, d, err := b.createSandboxObject(ctx, sbx)
			if err != nil {
				return nil, err
			}
			if named {
				missed = append(missed, d)
			} else {
				cold = append(cold, d)
			}
			if err := b.deleteSandbox(ctx, sbx); err != nil {
				return nil, err
			}
		}
	}
	return []row{timing(title, missed, cold, "cold")}, nil
}

// createPool creates a SandboxPool of replicas members of the template.
func (b *bench) createPool(ctx context.Context, name string, replicas int32, template afev1.SandboxTemplateSpec) (*afev1.SandboxPool, error) {
	p := &afev1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: afev1.SandboxPoolSpec{Replicas: replicas, Template: template}}
	return p, b.c.Create(ctx, p)
}

// claimWarm waits until every member of the pool is ready (so that the
// claim is warm), then creates sbx naming the pool and returns it once
// Ready, with the time from the create call to Ready seen through a
// watch; an error when the pool did not serve it.
func (b *bench) claimWarm(ctx context.Context, p *afev1.SandboxPool, sbx *afev1.Sandbox) (*afev1.Sandbox, time.Duration, error) {
	if err := b.waitPoolReady(ctx, p, p.Spec.Replicas); err != nil {
		return nil, 0, err
	}
	sbx.Spec.PoolRef = &afev1.PoolReference{Name: p.Name}
	sbx, d, err := b.createSandboxObject(ctx, sbx)
	if err == nil && sbx.Status.Pool != p.Name {
		err = fmt.Errorf("sandbox %s was not served from the pool %s (status.pool %q)", sbx.Name, p.Name, sbx.Status.Pool)
	}
	return sbx, d, err
}

func (b *bench) waitPoolReady(ctx context.Context, p *afev1.SandboxPool, n int32) error {
	return waitFor(ctx, time.Minute, func() error {
		got := &afev1.SandboxPool{}
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		if got.Status.ReadyReplicas != n {
			return fmt.Errorf("pool %s: %d of %d members ready", p.Name, got.Status.ReadyReplicas, n)
		}
		return nil
	})
}

// deletePool deletes the pool and waits until it is gone (its members
// removed).
func (b *bench) deletePool(ctx context.Context, p *afev1.SandboxPool) error {
	if err := client.IgnoreNotFound(b.c.Delete(ctx, p)); err != nil {
		return err
	}
	return waitFor(ctx, 2*time.Minute, func() error {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(p), &afev1.SandboxPool{})
		if err == nil {
			return fmt.Errorf("pool %s is still there", p.Name)
		}
		return client.IgnoreNotFound(err)
	})
}

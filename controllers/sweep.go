package controllers

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// Sweeper periodically removes the labelled Docker objects of this
// controller instance whose Sandbox no longer exists: leftovers of a crash,
// of a finalizer removed by hand, or of a Sandbox deleted while the
// controller was away.
type Sweeper struct {
	Client   client.Reader
	Cache    cache.Cache
	Engine   docker.Engine
	Instance string
	Period   time.Duration
}

// NeedLeaderElection is true: only the leader removes objects.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every Period, until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("sweep")
	if !s.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	for {
		if err := sweep(ctx, s.Client, s.Engine, map[string]string{afev1.LabelController: s.Instance}); err != nil && ctx.Err() == nil {
			log.Error(err, "Sweep of orphaned Docker objects")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Period):
		}
	}
}

// sweep removes the Docker objects carrying the labels whose afe.sandbox-uid
// is no existing Sandbox's: containers first, then networks, then volumes.
// Objects without an afe.sandbox-uid label are never touched.
func sweep(ctx context.Context, c client.Reader, engine docker.Engine, labels map[string]string) error {
	log := logf.FromContext(ctx)
	// Docker first, Sandboxes second: an object listed was made for a
	// Sandbox the cache already held, so it is in the later list.
	containers, err := engine.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	networks, err := engine.ListNetworks(ctx, labels)
	if err != nil {
		return err
	}
	volumes, err := engine.ListVolumes(ctx, labels)
	if err != nil {
		return err
	}
	if len(containers)+len(networks)+len(volumes) == 0 {
		return nil
	}
	list := &afev1.SandboxList{}
	if err := c.List(ctx, list); err != nil {
		return err
	}
	live := map[string]bool{}
	for i := range list.Items {
		live[string(list.Items[i].UID)] = true
	}
	orphan := func(l map[string]string) bool {
		uid := l[afev1.LabelSandboxUID]
		return uid != "" && !live[uid]
	}
	var errs []error
	for _, ct := range containers {
		if orphan(ct.Labels) {
			log.Info("Removing orphaned container", "container", ct.Name, "sandbox", ct.Labels[afev1.LabelNamespace]+"/"+ct.Labels[afev1.LabelSandbox])
			errs = append(errs, engine.RemoveContainer(ctx, ct.ID))
		}
	}
	for _, n := range networks {
		if orphan(n.Labels) {
			log.Info("Removing orphaned network", "network", n.Name)
			errs = append(errs, engine.RemoveNetwork(ctx, n.Name))
		}
	}
	for _, v := range volumes {
		if orphan(v.Labels) && !retainedSnapshot(ctx, c, v.Labels) {
			log.Info("Removing orphaned volume", "volume", v.Name)
			errs = append(errs, engine.RemoveVolume(ctx, v.Name))
		}
	}
	return errors.Join(errs...)
}

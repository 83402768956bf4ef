package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/egressnet"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/subnets"
)

// Timing of the egress phase.
const (
	proxyProbeTimeout = egressnet.ProxyProbeTimeout
	egressRetry       = 15 * time.Second
	// proxyAnswerTimeout bounds the wait for a proxy's answer to an
	// allowlist request (tens of milliseconds, a second under load): one
	// that does not answer (an image older than the controller) is
	// recreated.
	proxyAnswerTimeout = 5 * time.Second
)

// reconcileEgress gives a sandbox with egress its internal network and its
// proxy, and waits until the proxy answers. A sandbox without egress has no
// network; what an earlier spec created is removed once the container is off
// it (cleanupEgress).
func (r *Reconciler) reconcileEgress(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	sbx := s.sbx
	if s.claimed != nil {
		return r.claimedEgress(ctx, s)
	}
	if len(sbx.Spec.Egress) == 0 {
		s.resolved.Network = "none"
		writes.SetCondition(sbx, afev1.EgressReadyCondition, true, afev1.NoEgressReason, "The sandbox has no network")
		return ctrl.Result{}, nil
	}

	network, res, err := r.reconcileNetwork(ctx, s)
	if network == nil {
		return res, err
	}
	sbx.Status.NetworkName = network.Name

	opts, res, err := r.proxyOptions(ctx, s, network)
	if opts == nil {
		return res, err
	}
	s.resolved.Address = sandboxspec.SandboxAddress(opts.Address)
	ready, res, err := r.serveProxy(ctx, s, network.Name, *opts, func(allow sandboxspec.Allowlist) docker.ContainerSpec {
		return sandboxspec.Proxy(sbx, s.id, *opts, allow)
	})
	if ready {
		setEgressReady(s)
	}
	return res, err
}

// serveProxy is the egress phase's end, a sandbox's from a pool as a cold
// one's: the sandbox's allowlist rendered (internal/egress), its proxy as
// spec makes it for the allowlist run, or kept and given the allowlist in
// place, and the sandbox's proxy settings stated. ready is true when the
// proxy answers admitting it; the caller states EgressReady then.
func (r *Reconciler) serveProxy(ctx context.Context, s *sandboxScope, network string, opts sandboxspec.ProxyOptions,
	spec func(sandboxspec.Allowlist) docker.ContainerSpec) (bool, ctrl.Result, error) {
	allow, err := sandboxspec.ProxyAllowlist(s.sbx, opts)
	if err != nil {
		// Admission and Validate refused such a spec before: a manager's
		// denied address that is not one, or a bug. Retried.
		return false, ctrl.Result{}, fmt.Errorf("render the proxy's configuration: %w", err)
	}
	s.allowlist = allow
	want := spec(allow)
	if res, err := r.ensureProxy(ctx, s, want, allow); err != nil || !res.IsZero() {
		return false, res, err
	}
	return !proxyStarting(s, want.Name, network), ctrl.Result{}, nil
}

// proxyStarting states the sandbox's proxy and network, and the proxy's
// address there, which its container is to use, and is true when the
// proxy this reconcile started does not answer yet (awaitProxy waits for
// it).
func proxyStarting(s *sandboxScope, proxy, network string) bool {
	s.sbx.Status.ProxyName = proxy
	s.sbx.Status.ProxyURL = sandboxspec.ProxyURL
	s.resolved.Network = network
	s.resolved.ProxyEnv = sandboxspec.ProxyEnvFor()
	s.resolved.ProxyAddress = s.proxyAddress
	if s.proxyProbe == nil {
		return false
	}
	writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.ProvisioningReason,
		fmt.Sprintf("Proxy %s was started and is not answering yet", proxy))
	return true
}

// proxyOptions are the options of the sandbox's proxy: the egress network
// it leaves by, the host's addresses it refuses whatever the flags, its
// fixed address on the sandbox's network. nil with the result and error
// that end the phase when the controller's --egress-network is missing.
func (r *Reconciler) proxyOptions(ctx context.Context, s *sandboxScope, network *docker.Network) (*sandboxspec.ProxyOptions, ctrl.Result, error) {
	egressNet, err := r.Engine.InspectNetwork(ctx, r.Config.EgressNetwork)
	if errors.Is(err, docker.ErrNotFound) {
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.EgressNetworkMissingReason,
			fmt.Sprintf("The controller's --egress-network %s does not exist on the engine", r.Config.EgressNetwork))
		return nil, ctrl.Result{RequeueAfter: egressRetry}, nil
	}
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	deny, err := r.hostAddresses(ctx)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	return &sandboxspec.ProxyOptions{
		Image:         r.Config.ProxyImage,
		EgressNetwork: egressNet.Name,
		AllowPrivate:  r.Config.EgressAllowPrivate,
		DenyIPs:       deny,
		Address:       egressnet.FixedProxyAddress(r.Config.EgressSubnets, network),
	}, ctrl.Result{}, nil
}

// reconcileNetwork is the sandbox's internal network, made when missing and
// verified as its own; nil with the result and error that end the phase
// when there is none (no subnet left, or another's network of the name).
func (r *Reconciler) reconcileNetwork(ctx context.Context, s *sandboxScope) (*docker.Network, ctrl.Result, error) {
	netSpec := sandboxspec.Network(s.id)
	network, err := r.ensureNetwork(ctx, s, netSpec)
	if errors.Is(err, subnets.ErrExhausted) {
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.AddressPoolExhaustedReason,
			fmt.Sprintf("No free /%d block is left in the controller's %s (%s: %d blocks) for the sandbox's network; "+
				"widen %s or remove sandboxes with egress", subnets.BlockBits, subnets.Flag,
				subnets.String(r.Config.EgressSubnets), subnets.Size(r.Config.EgressSubnets), subnets.Flag))
		return nil, ctrl.Result{RequeueAfter: egressRetry}, nil
	}
	if errors.Is(err, docker.ErrNoAddressPool) {
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.AddressPoolExhaustedReason,
			"The Docker engine has no address range left for the sandbox's network (about 30 networks with the "+
				"engine's defaults); give the controller a range of its own with "+subnets.Flag+" (see docs/troubleshooting.md)")
		return nil, ctrl.Result{RequeueAfter: egressRetry}, nil
	}
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if !s.id.OwnsAs(network.Labels, afev1.RoleNetwork) {
		res, err := s.notAdopted(afev1.EgressReadyCondition, "Network", netSpec.Name)
		return nil, res, err
	}
	if err := egressnet.BoundNetwork(ctx, r.Config.ConnLimits, network); err != nil {
		return nil, ctrl.Result{}, err
	}
	return network, ctrl.Result{}, nil
}

// hostAddresses is the list of the engine host's addresses the proxy
// refuses: HostAddrs's, or read now without one.
func (r *Reconciler) hostAddresses(ctx context.Context) ([]string, error) {
	if r.HostAddrs != nil {
		return r.HostAddrs.Current(ctx)
	}
	list, _, err := hostaddrs.Read(ctx, r.Engine, r.Config.HostAddressInputs())
	return list, err
}

// ensureNetwork returns the sandbox's internal network, made when missing. A
// network of the name left by an earlier Sandbox of this namespace and name
// is an orphan: it goes, with the containers on it, and is made again.
func (r *Reconciler) ensureNetwork(ctx context.Context, s *sandboxScope, spec docker.NetworkSpec) (*docker.Network, error) {
	n, err := r.inspectOrCreateNetwork(ctx, spec)
	if err != nil || !s.id.Stale(n.Labels, afev1.RoleNetwork) {
		return n, err
	}
	if err := r.removeStale(ctx, s, n.Labels); err != nil {
		return nil, err
	}
	logf.FromContext(ctx).Info("Removing the network of an earlier sandbox of this name", "network", n.Name)
	if err := r.Engine.RemoveNetwork(ctx, n.ID); err != nil {
		return nil, err
	}
	return r.inspectOrCreateNetwork(ctx, spec)
}

// ensureProxy runs the proxy and waits until it answers, admitting the
// current allowlist. A running proxy is given a changed allowlist in place
// (ensureAdmits), keeping its connections; one that is missing, lost,
// drifted or cannot take the change is recreated. The sandbox container is
// not touched: it reaches the proxy by its alias.
func (r *Reconciler) ensureProxy(ctx context.Context, s *sandboxScope, want docker.ContainerSpec, allow sandboxspec.Allowlist) (ctrl.Result, error) {
	have, err := r.inspectProxy(ctx, s, want.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if have != nil && s.claimed == nil && s.id.Stale(have.Labels, afev1.RoleProxy) {
		if err := r.removeStale(ctx, s, have.Labels); err != nil {
			return ctrl.Result{}, err
		}
		have = nil
	}
	if have != nil && !r.ownsProxy(s, have) {
		return s.notAdopted(afev1.EgressReadyCondition, "Container", want.Name)
	}
	if err := r.boundFoundProxy(ctx, s, have, want.ExtraNetworks[0]); err != nil {
		return ctrl.Result{}, err
	}
	if have != nil && have.Labels[afev1.LabelSpecHash] == want.Labels[afev1.LabelSpecHash] {
		kept, res, err := r.keepProxy(ctx, s, have, allow)
		if kept && err == nil {
			s.proxyAddress, err = r.keptProxyAddress(ctx, have, want)
		}
		if kept || err != nil || !res.IsZero() {
			return res, err
		}
	}
	if err := r.ensureImage(ctx, s, afev1.EgressReadyCondition, "Proxy image", want.Image); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.startProxy(ctx, s, want, allow, have)
}

// startProxy makes the proxy in place of have (nil: a first one), and
// leaves in s.proxyProbe the outcome of its start and first answer.
func (r *Reconciler) startProxy(ctx context.Context, s *sandboxScope, want docker.ContainerSpec, allow sandboxspec.Allowlist, have *docker.Container) error {
	reason, what := proxyRecreation(s, have)
	if have != nil {
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return err
		}
	}
	logf.FromContext(ctx).Info("Creating proxy", "container", want.Name)
	// The proxy is made, and squid takes a while to answer, while the
	// sandbox's container is made (it needs only the network and the
	// proxy's address there); awaitProxy waits for the outcome before the
	// egress, and the sandbox, are Ready. A proxy without a fixed address
	// is made first: its address is the engine's choice.
	var made *docker.Container
	s.proxyAddress = want.IPv4Address
	if want.IPv4Address == "" {
		var err error
		if made, err = r.Engine.RunContainer(ctx, want); err != nil {
			return err
		}
		s.proxyAddress = egressnet.ProxyAddressOn(made, want.Network)
	}
	probe := make(chan error, 1)
	about := s.sbx.DeepCopy() // the Event's object, apart from the one the phases change
	go func() {
		created, err := made, error(nil)
		if created == nil {
			created, err = r.Engine.RunContainer(ctx, want)
		}
		if err == nil {
			err = egressnet.BoundProxy(ctx, r.Config.ConnLimits, created, want.ExtraNetworks[0])
		}
		if err == nil && reason != "" {
			r.Recorder.Eventf(about, nil, corev1.EventTypeNormal, reason, "Create", what, want.Name)
		}
		if err == nil {
			if err = r.waitProxy(ctx, created); err != nil && !errors.Is(err, docker.ErrUnavailable) {
				err = &proxyNotAnswering{err}
			}
		}
		if err == nil {
			r.mem.admitted.record(about.UID, created, allow.ID)
		}
		probe <- err
	}()
	s.proxyProbe = probe
	return nil
}

// keptProxyAddress is the address of a proxy kept on the sandbox's
// network: its fixed one, or the engine's choice, read again when the
// proxy was stopped as found (a suspended sandbox's, started since).
func (r *Reconciler) keptProxyAddress(ctx context.Context, have *docker.Container, want docker.ContainerSpec) (string, error) {
	if want.IPv4Address != "" {
		return want.IPv4Address, nil
	}
	if addr := egressnet.ProxyAddressOn(have, want.Network); addr != "" {
		return addr, nil
	}
	now, err := r.Engine.InspectContainer(ctx, have.ID)
	if err != nil {
		return "", err
	}
	return egressnet.ProxyAddressOn(now, want.Network), nil
}

// boundFoundProxy puts the proxy this reconcile found under the host's
// conntrack bound: one this process did not make (a restart) once, the
// others at the cost of a lookup. A claimed member's was bounded when its
// pool made it: the claim adds nothing.
func (r *Reconciler) boundFoundProxy(ctx context.Context, s *sandboxScope, have *docker.Container, egressNetwork string) error {
	if have == nil || s.claimed != nil {
		return nil
	}
	return egressnet.BoundProxy(ctx, r.Config.ConnLimits, have, egressNetwork)
}

// proxyRecreation is the reason and message (its %s the proxy's name) of
// the Event of a proxy made again in place of have; none for a first
// proxy, which EgressReady states.
func proxyRecreation(s *sandboxScope, have *docker.Container) (reason, what string) {
	switch {
	case have != nil && !have.Running:
		return afev1.ProxyRecreatedReason, fmt.Sprintf("Proxy %%s exited with code %d and was recreated", have.ExitCode)
	case have != nil:
		return afev1.ProxyRecreatedReason, "Recreated proxy %s"
	case s.sbx.Status.ProxyName != "":
		return afev1.ProxyRecreatedReason, "Proxy %s was lost and is recreated"
	}
	return "", ""
}

// inspectProxy is the container of the proxy's name, nil when there is
// none: as this reconcile already inspected it (s.proxy), or asked of the
// engine now.
func (r *Reconciler) inspectProxy(ctx context.Context, s *sandboxScope, name string) (*docker.Container, error) {
	if c := s.proxy; c != nil && c.Name == name {
		s.proxy = nil
		return c, nil
	}
	have, err := r.Engine.InspectContainer(ctx, name)
	if errors.Is(err, docker.ErrNotFound) {
		return nil, nil
	}
	return have, err
}

// ownsProxy is true when c is the sandbox's proxy: made for it, or, for a
// sandbox served from a pool, its claimed member's (pool.BindsProxy).
func (r *Reconciler) ownsProxy(s *sandboxScope, c *docker.Container) bool {
	if s.claimed != nil {
		return pool.BindsProxy(s.id, s.claimed.record, c)
	}
	return s.id.OwnsAs(c.Labels, afev1.RoleProxy)
}

// proxyNotAnswering is a proxy that runs and does not answer.
type proxyNotAnswering struct{ err error }

func (e *proxyNotAnswering) Error() string { return e.err.Error() }

// awaitProxy waits for the proxy this reconcile started, and states its
// outcome; the egress is Ready once it answered.
func (r *Reconciler) awaitProxy(_ context.Context, s *sandboxScope) (ctrl.Result, error) {
	if s.proxyProbe == nil {
		return ctrl.Result{}, nil
	}
	err := <-s.proxyProbe
	s.proxyProbe = nil
	name := naming.Proxy(s.id.Key)
	var silent *proxyNotAnswering
	switch {
	case err == nil:
		setEgressReady(s)
		return ctrl.Result{}, nil
	case errors.Is(err, docker.ErrStartFailed):
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.ProxyNotAnsweringReason,
			fmt.Sprintf("Proxy %s could not be started; check the controller's --proxy-image: %v", name, err))
		return ctrl.Result{RequeueAfter: startFailedRetry}, nil
	case errors.Is(err, docker.ErrConflict):
		return s.notAdopted(afev1.EgressReadyCondition, "Container", name)
	case errors.As(err, &silent):
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.ProxyNotAnsweringReason,
			fmt.Sprintf("Proxy %s does not answer: %v", name, silent.err))
		return ctrl.Result{RequeueAfter: egressRetry}, nil
	}
	return ctrl.Result{}, err
}

// waitProxy probes the proxy from inside its container until squid answers.
func (r *Reconciler) waitProxy(ctx context.Context, proxy *docker.Container) error {
	return egressnet.WaitProxy(ctx, r.Engine, proxy)
}

// cleanupEgress removes the proxy and the network of a sandbox that no longer
// declares egress, once its container has left the network. Whether there
// is anything to remove is decided from the engine (the derived names and
// their labels), never from the status, which a tenant may write: it is
// looked at once per process for a sandbox that may ever have had egress
// (one whose spec changed since its creation), so a steady sandbox costs
// nothing.
func (r *Reconciler) cleanupEgress(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	sbx := s.sbx
	if len(sbx.Spec.Egress) > 0 {
		r.mem.egressGone.Delete(sbx.UID)
		return ctrl.Result{}, r.removeLegacyEgress(ctx, s)
	}
	if _, gone := r.mem.egressGone.Load(sbx.UID); gone || sbx.Generation <= 1 {
		// Created without egress and never changed: no proxy or network was
		// ever made for this UID.
		s.sbx.Status.ProxyName, s.sbx.Status.ProxyURL, s.sbx.Status.NetworkName = "", "", ""
		return ctrl.Result{}, nil
	}
	if err := r.deleteEgress(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.mem.egressGone.Store(sbx.UID, true)
	return ctrl.Result{}, nil
}

// deleteEgress removes the proxy, then the network, under their current and
// legacy names, when they are this sandbox's.
func (r *Reconciler) deleteEgress(ctx context.Context, s *sandboxScope) error {
	for _, names := range [][2]string{
		{naming.Proxy(s.id.Key), naming.Network(s.id.Key)},
		{naming.LegacyProxy(s.id.Key), naming.LegacyNetwork(s.id.Key)},
	} {
		if err := r.removeProxyAndNetwork(ctx, s, names[0], names[1]); err != nil {
			return err
		}
	}
	s.sbx.Status.ProxyName, s.sbx.Status.ProxyURL, s.sbx.Status.NetworkName = "", "", ""
	return nil
}

// removeLegacyEgress removes, once per Sandbox and process, the proxy and
// network an earlier controller version made under the legacy names: by
// now the container has been recreated on the network of the current name.
func (r *Reconciler) removeLegacyEgress(ctx context.Context, s *sandboxScope) error {
	if _, done := r.mem.legacyChecked.Load(s.sbx.UID); done {
		return nil
	}
	if err := r.removeProxyAndNetwork(ctx, s, naming.LegacyProxy(s.id.Key), naming.LegacyNetwork(s.id.Key)); err != nil {
		return err
	}
	r.mem.legacyChecked.Store(s.sbx.UID, true)
	return nil
}

// removeProxyAndNetwork removes the proxy, then the network, of the names
// when their labels say they are this sandbox's in those roles.
func (r *Reconciler) removeProxyAndNetwork(ctx context.Context, s *sandboxScope, proxy, network string) error {
	if err := r.removeOwnedContainer(ctx, s, proxy, afev1.RoleProxy); err != nil {
		return err
	}
	n, err := r.Engine.InspectNetwork(ctx, network)
	switch {
	case errors.Is(err, docker.ErrNotFound):
		return nil
	case err != nil:
		return err
	case s.id.OwnsAs(n.Labels, afev1.RoleNetwork):
		return r.Engine.RemoveNetwork(ctx, n.ID)
	}
	return nil
}

func egressSummary(hosts []afev1.EgressHost) string {
	const show = 5
	names := make([]string, 0, show)
	for i, h := range hosts {
		if i == show {
			names = append(names, fmt.Sprintf("and %d more", len(hosts)-show))
			break
		}
		names = append(names, string(h))
	}
	return strings.Join(names, ", ")
}

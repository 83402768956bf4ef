package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/sandboxspec"
)

// keepProxy keeps the proxy of the current spec: started again when a
// suspension stopped it, and given the allowlist in place (ensureAdmits)
// before the sandbox's container starts. kept is false when the proxy is to
// be recreated (it could not be started, or could not take the allowlist);
// a result or an error ends the phase.
func (r *Reconciler) keepProxy(ctx context.Context, s *sandboxScope, have *docker.Container, allow sandboxspec.Allowlist) (bool, ctrl.Result, error) {
	if !have.Running && s.wasSuspended {
		res, ok, err := r.restartProxy(ctx, s, have)
		if !ok || err != nil || !res.IsZero() {
			return false, res, err
		}
		if have, err = r.Engine.InspectContainer(ctx, have.ID); err != nil {
			return false, ctrl.Result{}, err
		}
	}
	if !have.Running {
		return false, ctrl.Result{}, nil
	}
	kept, err := r.ensureAdmits(ctx, s, have, allow)
	return kept, ctrl.Result{}, err
}

// setEgressReady states that the sandbox's proxy admits its allowlist, and
// which (its ID).
func setEgressReady(s *sandboxScope) {
	writes.SetCondition(s.sbx, afev1.EgressReadyCondition, true, afev1.ReadyReason,
		fmt.Sprintf("Proxy %s admits %s (allowlist %s)", naming.Proxy(s.id.Key), egressSummary(s.sbx.Spec.Egress), s.allowlist.ID))
}

// ensureAdmits makes the running proxy admit allow: it asks the proxy
// which allowlist it runs with (unless this manager gave it that one since
// the proxy's start) and, when another, gives it allow in place, a request
// on the proxy's stdin that only the engine's clients can write
// (Allowlist.Request; a few milliseconds, where an exec costs 100-150). false
// when the proxy could not take it, or did not say so with the request's
// nonce: it is then recreated.
func (r *Reconciler) ensureAdmits(ctx context.Context, s *sandboxScope, proxy *docker.Container, allow sandboxspec.Allowlist) (bool, error) {
	uid := s.sbx.UID
	if r.mem.admitted.holds(uid, proxy, allow.ID) {
		return true, nil
	}
	log := logf.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, proxyProbeTimeout)
	defer cancel()
	// A member's proxy being claimed admits nothing: no need to ask. The
	// answer is an ID: what squid's container prints is bounded.
	if !s.claimingProxy {
		out := &runexec.Tail{Limit: 256}
		code, err := r.Engine.Exec(ctx, proxy.ID, docker.ExecSpec{Cmd: sandboxspec.ProxyAdmits(), Stdout: out})
		if errors.Is(err, docker.ErrUnavailable) {
			return false, err
		}
		if err == nil && code == 0 && strings.TrimSpace(out.String()) == allow.ID {
			r.mem.admitted.record(uid, proxy, allow.ID)
			return true, nil
		}
	}
	nonce := requestNonce()
	tell, cancelTell := context.WithTimeout(ctx, proxyAnswerTimeout)
	defer cancelTell()
	answer, err := r.Engine.Tell(tell, proxy.ID, allow.Request(nonce), func(line string) bool { return allow.Answered(nonce, line) })
	if errors.Is(err, docker.ErrUnavailable) {
		return false, err
	}
	if err != nil || !allow.Taken(nonce, answer) {
		log.Info("The proxy could not take its allowlist in place; recreating it", "container", proxy.Name, "answer", answer, "error", err)
		return false, nil
	}
	log.Info("Gave the proxy its allowlist in place", "container", proxy.Name, "allowlist", allow.ID)
	r.mem.admitted.record(uid, proxy, allow.ID)
	if s.claimingProxy {
		return true, nil // the claim's, said by its condition
	}
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, afev1.EgressChangedReason, "Reconfigure",
		"Proxy %s admits %s (allowlist %s) in place; its connections are kept", proxy.Name, egressSummary(s.sbx.Spec.Egress), allow.ID)
	return true, nil
}

// restartProxy starts again the proxy a suspension stopped and waits until
// it answers; ok is false when it could not be started, and it is then
// recreated as a lost one.
func (r *Reconciler) restartProxy(ctx context.Context, s *sandboxScope, have *docker.Container) (ctrl.Result, bool, error) {
	logf.FromContext(ctx).Info("Starting the proxy of a suspended sandbox", "container", have.Name)
	err := r.Engine.StartContainer(ctx, have.ID)
	if errors.Is(err, docker.ErrStartFailed) {
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if err := r.waitProxy(ctx, have); err != nil {
		if errors.Is(err, docker.ErrUnavailable) {
			return ctrl.Result{}, true, err
		}
		writes.SetCondition(s.sbx, afev1.EgressReadyCondition, false, afev1.ProxyNotAnsweringReason,
			fmt.Sprintf("Proxy %s does not answer: %v", have.Name, err))
		return ctrl.Result{RequeueAfter: egressRetry}, true, nil
	}
	return ctrl.Result{}, true, nil
}

// requestNonce is a fresh nonce for a request to a proxy: 128 random
// bits, lower-case hex, that no line of squid's can carry by chance.
func requestNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

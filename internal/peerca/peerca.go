// Package peerca keeps the identity managers present to each other in
// per-node mode, where one manager runs per node and forwards access-API
// requests to the manager of another node over mutually authenticated TLS.
//
// The managers share one CA, kept in a Secret of the controller's namespace:
// the first to find it missing makes it, the first to find it near expiry
// replaces it, and the CA it replaced stays trusted until it expires, so
// that certificates issued from it keep working while every manager moves
// to the new one. Each manager issues itself a short-lived certificate from
// the current CA, naming its node; a peer is accepted only with such a
// certificate, verified against the CAs trusted at the time of the
// handshake. After a rotation, a manager keeps presenting the certificate
// it holds of the replaced CA for two refreshes (the rotation's time is in
// the Secret): a peer that has not read the Secret since trusts only that
// CA.
package peerca

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/internal/pki"
)

// Organization is the O of every manager certificate; nothing else the CA
// signs carries it, so it is what tells a manager from any other holder of
// a certificate of the CA.
const Organization = "sandbox.afe.dev:managers"

// Options says where the CA is kept, whose identity this is, and how long
// what it makes lives. Zero durations take the defaults.
type Options struct {
	// Secret is the CA Secret, e.g. afe-system/afe-peer-ca.
	Secret types.NamespacedName
	// Node is this manager's node (its --instance): the name its
	// certificate carries.
	Node string
	// CAValidity is how long a CA made is valid (default pki.Validity).
	CAValidity time.Duration
	// RotateBefore is how long before its expiry a CA is replaced
	// (default 30 days). It must be shorter than CAValidity.
	RotateBefore time.Duration
	// CertValidity is how long this node's certificate is valid (default 7
	// days); it is reissued when a third of it is left.
	CertValidity time.Duration
	// Refresh is how often Start reads the Secret again (default 1 minute).
	Refresh time.Duration
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
}

// Authority is this manager's view of the shared CA and its own
// certificate. Its TLS configs and accessors are safe for use while Ensure
// runs.
type Authority struct {
	c    client.Client
	opts Options
	log  logr.Logger

	// ensuring serialises Ensure: Start's and a caller's.
	ensuring sync.Mutex
	state    atomic.Pointer[state]

	changedMu sync.Mutex
	changed   chan struct{}
}

// state is what one Ensure ended with; handshakes read it whole.
type state struct {
	ca *pki.CA
	// trusted is the pool of the CAs a peer's chain may end in: the current
	// one and the previous while it is valid; bundle is their PEM.
	trusted *x509.CertPool
	bundle  []byte
	// previous is the CA ca replaced, while it is valid; certificates of it
	// in hand are kept until keepUntil, 2×Refresh after the rotation.
	previous  *x509.Certificate
	keepUntil time.Time
	// node is this node's certificate, issued by nodeCA: ca's or, until
	// keepUntil, previous.
	node   *tls.Certificate
	nodeCA *x509.Certificate
}

// New is an Authority keeping its CA in opts.Secret through c, an uncached
// client (Secrets are never cached). It reads nothing yet: call Ensure.
func New(c client.Client, opts Options) (*Authority, error) {
	if err := defaults(&opts); err != nil {
		return nil, err
	}
	return &Authority{
		c:       c,
		opts:    opts,
		log:     ctrl.Log.WithName("peerca"),
		changed: make(chan struct{}),
	}, nil
}

func defaults(o *Options) error {
	if o.Secret.Namespace == "" || o.Secret.Name == "" {
		return errors.New("peer CA: no Secret namespace and name")
	}
	if errs := validation.IsDNS1123Subdomain(o.Node); len(errs) > 0 {
		return fmt.Errorf("peer CA: node %q: %s", o.Node, strings.Join(errs, "; "))
	}
	durations := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&o.CAValidity, pki.Validity},
		{&o.RotateBefore, 30 * 24 * time.Hour},
		{&o.CertValidity, 7 * 24 * time.Hour},
		{&o.Refresh, time.Minute},
	}
	for _, d := range durations {
		if *d.d < 0 {
			return fmt.Errorf("peer CA: negative duration %s", *d.d)
		}
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	// A CA made already due for rotation would be replaced at every read.
	if o.RotateBefore >= o.CAValidity {
		return fmt.Errorf("peer CA: rotation %s before expiry leaves nothing of a CA valid %s", o.RotateBefore, o.CAValidity)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// NeedLeaderElection is false: every manager keeps its own certificate.
func (a *Authority) NeedLeaderElection() bool { return false }

// Start calls Ensure every Refresh until ctx ends, logging its errors: the
// certificates in hand stay valid long past a failed read. The caller runs
// a successful Ensure first; Start only refreshes.
func (a *Authority) Start(ctx context.Context) error {
	tick := time.NewTicker(a.opts.Refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := a.Ensure(ctx); err != nil && ctx.Err() == nil {
				a.log.Error(err, "Refreshing the peer CA", "secret", a.opts.Secret)
			}
		}
	}
}

// CABundle is the PEM of the trusted CAs, the current then the previous
// while it is valid: the caBundle of an APIService served with a
// certificate of ServingCertificate. Nil before the first Ensure.
func (a *Authority) CABundle() []byte {
	if st := a.state.Load(); st != nil {
		return bytes.Clone(st.bundle)
	}
	return nil
}

// Changed is closed when the trusted CA bundle changes (the first Ensure
// included), and replaced by a new channel: take it again after it fires.
func (a *Authority) Changed() <-chan struct{} {
	a.changedMu.Lock()
	defer a.changedMu.Unlock()
	return a.changed
}

func (a *Authority) notify() {
	a.changedMu.Lock()
	defer a.changedMu.Unlock()
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *Authority) now() time.Time { return a.opts.Now() }

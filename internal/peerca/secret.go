package peerca

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"afe.dev/sandbox/internal/pki"
)

// The keys of the CA Secret.
const (
	caCertKey     = "ca.crt"
	caKeyKey      = "ca.key"
	caPreviousKey = "ca-previous.crt"
)

// rotatedAtAnnotation is when the Secret's CA was made to replace another,
// in RFC 3339, written with the rotation: how long the certificates of the
// replaced CA may still be presented is counted from it.
const rotatedAtAnnotation = "sandbox.afe.dev/rotated-at"

// caName is the common name of every CA made here.
const caName = "afe-peer-ca"

// attempts bounds how often Ensure re-reads the Secret after losing a race
// to another manager; Start tries again at its next refresh.
const attempts = 5

// Ensure reads the CA Secret, makes it when it is missing or replaces a CA
// that is unreadable or expires within RotateBefore, and (re)issues this
// node's certificate when it is missing, a third of it is left, or the CA
// changed, a certificate of the replaced CA being kept for 2×Refresh after
// the rotation (see keeps). A write lost to another manager (the Secret
// created or updated since it was read) reads the Secret again and takes
// that manager's CA.
func (a *Authority) Ensure(ctx context.Context) error {
	a.ensuring.Lock()
	defer a.ensuring.Unlock()
	var err error
	for range attempts {
		var secret *corev1.Secret
		if secret, err = a.sync(ctx); err == nil {
			return a.adopt(secret.Data, a.rotatedAt(secret), a.now())
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("peer CA %s: still racing after %d reads: %w", a.opts.Secret, attempts, err)
}

// sync reads the Secret and writes it when its CA is missing or due, and
// returns it as it is then.
func (a *Authority) sync(ctx context.Context) (*corev1.Secret, error) {
	now := a.now()
	secret := &corev1.Secret{}
	err := a.c.Get(ctx, a.opts.Secret, secret)
	if apierrors.IsNotFound(err) {
		return a.create(ctx, now)
	}
	if err != nil {
		return nil, fmt.Errorf("read peer CA %s: %w", a.opts.Secret, err)
	}
	data, fresh, err := a.next(secret.Data, now)
	if err != nil {
		return nil, err
	}
	if fresh == nil {
		return secret, nil
	}
	// Update carries the resourceVersion read: a manager that rotated in
	// the meantime makes this a conflict rather than a second rotation.
	// The time goes in the same write, so that no manager reads the new CA
	// without it.
	secret.Data = data
	metav1.SetMetaDataAnnotation(&secret.ObjectMeta, rotatedAtAnnotation, now.UTC().Format(time.RFC3339Nano))
	if err := a.c.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("rotate peer CA %s: %w", a.opts.Secret, err)
	}
	a.log.Info("Rotated the peer CA", "secret", a.opts.Secret, "notAfter", fresh.Cert.NotAfter)
	return secret, nil
}

// create makes the Secret with a new CA. It records no rotation: no
// certificate of another CA is trusted to be kept.
func (a *Authority) create(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	data, fresh, err := a.next(nil, now)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: a.opts.Secret.Namespace,
			Name:      a.opts.Secret.Name,
			Labels:    map[string]string{"app.kubernetes.io/name": "afe-sandbox"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	if err := a.c.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("create peer CA %s: %w", a.opts.Secret, err)
	}
	a.log.Info("Made the peer CA", "secret", a.opts.Secret, "notAfter", fresh.Cert.NotAfter)
	return secret, nil
}

// rotatedAt is when the Secret's CA replaced another, zero when the Secret
// does not say (made, or rotated by a manager that did not record it), so
// that nothing of the previous CA is kept: the behaviour before the time
// was recorded.
func (a *Authority) rotatedAt(secret *corev1.Secret) time.Time {
	value, ok := secret.Annotations[rotatedAtAnnotation]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		a.log.Error(err, "Ignoring the peer CA's rotation time", "secret", a.opts.Secret, "annotation", rotatedAtAnnotation)
		return time.Time{}
	}
	return t
}

// next is the Secret's data as it should be at now: data itself while its
// CA is readable and valid past RotateBefore, else that of a new CA, also
// returned, with the old CA's certificate as previous while it is valid.
func (a *Authority) next(data map[string][]byte, now time.Time) (map[string][]byte, *pki.CA, error) {
	ca, err := pki.LoadCA(data[caCertKey], data[caKeyKey])
	if err == nil && now.Add(a.opts.RotateBefore).Before(ca.Cert.NotAfter) {
		return data, nil, nil
	}
	fresh, err := pki.NewCAAt(caName, now, a.opts.CAValidity)
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]byte{caCertKey: fresh.CertPEM, caKeyKey: fresh.KeyPEM}
	// The certificate alone is enough to keep trusting it, even when its
	// key is what made the CA unreadable.
	if old := validCA(data[caCertKey], now); old != nil {
		out[caPreviousKey] = data[caCertKey]
	}
	return out, fresh, nil
}

// adopt makes the CA of data, rotated at rotatedAt, the one this manager
// trusts and issues from, issues this node's certificate when it may not
// keep the one in hand, and tells Changed's readers when the trusted bundle
// differs from before.
func (a *Authority) adopt(data map[string][]byte, rotatedAt, now time.Time) error {
	ca, err := pki.LoadCA(data[caCertKey], data[caKeyKey])
	if err != nil {
		return fmt.Errorf("peer CA %s: %w", a.opts.Secret, err)
	}
	next := &state{ca: ca, trusted: x509.NewCertPool(), bundle: bytes.Clone(ca.CertPEM)}
	next.trusted.AddCert(ca.Cert)
	if prev := validCA(data[caPreviousKey], now); prev != nil {
		next.trusted.AddCert(prev)
		next.bundle = append(next.bundle, data[caPreviousKey]...)
		next.previous = prev
		next.keepUntil = rotatedAt.Add(2 * a.opts.Refresh)
	}
	old := a.state.Load()
	if old != nil && next.keeps(old.nodeCA, old.node.Leaf, now) {
		next.node, next.nodeCA = old.node, old.nodeCA
	} else {
		if next.node, err = a.issueNode(ca, now); err != nil {
			return err
		}
		next.nodeCA = ca.Cert
	}
	a.state.Store(next)
	if old == nil || !bytes.Equal(old.bundle, next.bundle) {
		a.notify()
	}
	return nil
}

func (a *Authority) issueNode(ca *pki.CA, now time.Time) (*tls.Certificate, error) {
	pair, err := ca.Issue(pki.Spec{
		CommonName:   a.opts.Node,
		Organization: Organization,
		DNSNames:     []string{a.opts.Node},
		Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Now:          now,
		Validity:     a.opts.CertValidity,
	})
	if err != nil {
		return nil, fmt.Errorf("issue the certificate of node %s: %w", a.opts.Node, err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, err
	}
	a.log.Info("Issued the node's peer certificate", "node", a.opts.Node, "notAfter", cert.Leaf.NotAfter)
	return &cert, nil
}

// keeps is whether a certificate in hand, issued by the CA certificate
// issuer, may still be presented at now instead of one of the current CA:
// while it is not due, when it is of the current CA, or of the previous
// one until keepUntil. Every manager reads the Secret at least once a
// Refresh, so until a Refresh after the rotation some may trust only the
// previous CA; a certificate of the new one would fail their handshakes,
// one of the previous CA passes every manager's. The second Refresh is a
// margin for refreshes that run late.
func (st *state) keeps(issuer, leaf *x509.Certificate, now time.Time) bool {
	switch {
	case leaf == nil || due(leaf, now):
		return false
	case issuer.Equal(st.ca.Cert):
		return true
	default:
		return st.previous != nil && issuer.Equal(st.previous) && now.Before(st.keepUntil)
	}
}

// due is whether a certificate has a third of its life left or less.
func due(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) <= life/3
}

// validCA is the CA certificate of data if it is one and valid at now.
func validCA(data []byte, now time.Time) *x509.Certificate {
	c, err := pki.ParseCertificate(data)
	if err != nil || !c.IsCA || now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil
	}
	return c
}

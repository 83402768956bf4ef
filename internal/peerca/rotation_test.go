package peerca

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/internal/pki"
)

// refresh is Options.Refresh by default, which the Authorities of these
// tests have.
const refresh = time.Minute

// After a rotation, this node's and the serving certificate in hand of the
// previous CA are kept, while not due, until 2×Refresh after it; a manager
// with none, past that time, or not told when the rotation was, issues
// from the new CA.
func TestCertificatesAfterRotation(t *testing.T) {
	tests := map[string]struct {
		issued     time.Duration // before the rotation; zero: none yet
		at         time.Duration // after the rotation
		unknown    bool          // the Secret does not say when it rotated
		noPrevious bool          // the Secret holds no previous CA
		kept       bool
	}{
		"within 2×Refresh":                     {issued: time.Minute, at: 2*refresh - time.Second, kept: true},
		"at 2×Refresh":                         {issued: time.Minute, at: 2 * refresh},
		"due within 2×Refresh":                 {issued: 5 * day, at: time.Second},
		"a manager started after the rotation": {at: time.Second},
		"the rotation's time unknown":          {issued: time.Minute, at: time.Second, unknown: true},
		"no previous CA":                       {issued: time.Minute, at: time.Second, noPrevious: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			_, oldCA := sharing(t, clk, "node-a")
			a := newAuthority(t, nil, testSecret, "node-a", clk)
			if a.opts.Refresh != refresh {
				t.Fatalf("Refresh %s by default, want %s", a.opts.Refresh, refresh)
			}
			serving := a.ServingCertificate([]string{"afe-access.afe-system.svc"}, nil)
			t1 := oldCA.Cert.NotAfter.Add(-a.opts.RotateBefore + time.Hour)
			if tc.issued != 0 {
				clk.Set(t1.Add(-tc.issued))
				holding(t, a, caData(oldCA), serving)
			}
			data, newCA, err := a.next(caData(oldCA), t1)
			if err != nil || newCA == nil {
				t.Fatalf("not rotated: %v", err)
			}
			rotatedAt := t1
			if tc.unknown {
				rotatedAt = time.Time{}
			}
			if tc.noPrevious {
				delete(data, caPreviousKey)
			}
			clk.Set(t1.Add(tc.at))
			if err := a.adopt(data, rotatedAt, clk.Now()); err != nil {
				t.Fatal(err)
			}
			want := newCA.CertPEM
			if tc.kept {
				want = oldCA.CertPEM
			}
			issuedBy(t, "this node's certificate", nodeLeaf(a), want)
			cert, err := serving(nil)
			if err != nil {
				t.Fatal(err)
			}
			issuedBy(t, "the serving certificate", cert.Leaf, want)
		})
	}
}

// holding has a take the CA of data, rotated at no known time, and issue
// this node's certificate and serving's.
func holding(t *testing.T, a *Authority, data map[string][]byte, serving func(*tls.ClientHelloInfo) (*tls.Certificate, error)) {
	t.Helper()
	if err := a.adopt(data, time.Time{}, a.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := serving(nil); err != nil {
		t.Fatal(err)
	}
}

// Against the API server: A rotates the CA while B has not read the Secret
// since, so B trusts only the old CA. Until 2×Refresh after the rotation A
// presents its certificates of the old CA and B still trusts them; C,
// started meanwhile, has one of the new CA, which every manager that read
// the Secret trusts. Then A and B move to the new CA, and all still reach
// each other.
func testRotationWindow(t *testing.T, base client.WithWatch) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "default", Name: "rotation-window"}
	clk := newClock()
	a := newAuthority(t, base, key, "node-a", clk)
	b := newAuthority(t, base, key, "node-b", clk)
	ensure(ctx, t, a, b)
	// A refresh just before the CA is due, so that the certificates in
	// hand are not: only the CA's change could renew them.
	t1 := clk.Now().Add(a.opts.CAValidity - a.opts.RotateBefore + time.Minute)
	clk.Set(t1.Add(-2 * time.Minute))
	ensure(ctx, t, a, b)
	oldBundle := b.CABundle()
	serving := a.ServingCertificate([]string{"afe-access.default.svc"}, nil)
	served(t, serving, oldBundle, clk)

	clk.Set(t1)
	ensure(ctx, t, a)
	secret := &corev1.Secret{}
	if err := base.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	newCA := secret.Data[caCertKey]
	if got, err := time.Parse(time.RFC3339, secret.Annotations[rotatedAtAnnotation]); err != nil || !got.Equal(t1) {
		t.Errorf("rotated at %q (%v), want %s", secret.Annotations[rotatedAtAnnotation], err, t1)
	}
	if string(b.CABundle()) != string(oldBundle) || string(newCA) == string(oldBundle) {
		t.Fatal("want A rotated and B trusting only the old CA")
	}
	reachEachOther(t, a, b)
	// The caBundle of an APIService published before the rotation.
	served(t, serving, oldBundle, clk)

	clk.Set(t1.Add(a.opts.Refresh / 2))
	ensure(ctx, t, b)
	c := newAuthority(t, base, key, "node-c", clk)
	ensure(ctx, t, c)
	issuedBy(t, "C's certificate", nodeLeaf(c), newCA)
	reachEachOther(t, c, a)
	reachEachOther(t, c, b)

	clk.Set(t1.Add(2 * a.opts.Refresh))
	ensure(ctx, t, a, b, c)
	for _, m := range []*Authority{a, b, c} {
		issuedBy(t, m.opts.Node+"'s certificate", nodeLeaf(m), newCA)
	}
	reachEachOther(t, a, b)
	reachEachOther(t, a, c)
	reachEachOther(t, b, c)
	issuedBy(t, "the serving certificate", served(t, serving, a.CABundle(), clk), newCA)
}

func ensure(ctx context.Context, t *testing.T, as ...*Authority) {
	t.Helper()
	for _, a := range as {
		if err := a.Ensure(ctx); err != nil {
			t.Fatalf("%s: %v", a.opts.Node, err)
		}
	}
}

// served handshakes with a server presenting get's certificate, from a
// client trusting the CAs of bundle, and returns that certificate.
func served(t *testing.T, get func(*tls.ClientHelloInfo) (*tls.Certificate, error), bundle []byte, clk *clock) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("no CA in the bundle")
	}
	server := &tls.Config{GetCertificate: get}
	client := &tls.Config{RootCAs: roots, ServerName: "afe-access.default.svc", Time: clk.Now}
	if h := handshake(t, server, client); h.clientErr != nil || h.serverErr != nil {
		t.Fatalf("serving: server %v, client %v", h.serverErr, h.clientErr)
	}
	cert, err := get(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf
}

// issuedBy checks that what, the certificate leaf, is signed by the CA of
// caPEM.
func issuedBy(t *testing.T, what string, leaf *x509.Certificate, caPEM []byte) {
	t.Helper()
	ca, err := pki.ParseCertificate(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Errorf("%s is not of the CA expected: %v", what, err)
	}
}

package peerca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"afe.dev/sandbox/internal/pki"
)

const day = 24 * time.Hour

func TestNewRefuses(t *testing.T) {
	tests := map[string]struct {
		opts Options
		ok   bool
	}{
		"defaults":                 {Options{Secret: testSecret, Node: "node-a.example"}, true},
		"no node":                  {Options{Secret: testSecret}, false},
		"a node no DNS name":       {Options{Secret: testSecret, Node: "Node_A"}, false},
		"no Secret name":           {Options{Secret: types.NamespacedName{Namespace: "afe-system"}, Node: "node-a"}, false},
		"rotation past the CA":     {Options{Secret: testSecret, Node: "node-a", CAValidity: 10 * day, RotateBefore: 10 * day}, false},
		"a negative refresh":       {Options{Secret: testSecret, Node: "node-a", Refresh: -time.Second}, false},
		"rotation within validity": {Options{Secret: testSecret, Node: "node-a", CAValidity: 10 * day, RotateBefore: 3 * day}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(nil, tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want ok=%t", err, tc.ok)
			}
		})
	}
}

// next keeps a CA valid past RotateBefore and replaces any other, keeping
// the old certificate as previous only while it is valid.
func TestNext(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	a := newAuthority(t, nil, testSecret, "node-a", clk)
	fresh, err := pki.NewCAAt(caName, now, a.opts.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := pki.NewCAAt(caName, now.Add(-a.opts.CAValidity+a.opts.RotateBefore-time.Hour), a.opts.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := pki.NewCAAt(caName, now.Add(-a.opts.CAValidity-time.Hour), a.opts.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		data     map[string][]byte
		rotated  bool
		previous []byte
	}{
		"missing":                {data: nil, rotated: true},
		"valid":                  {data: caData(fresh), rotated: false},
		"expiring":               {data: caData(expiring), rotated: true, previous: expiring.CertPEM},
		"expired":                {data: caData(expired), rotated: true},
		"unreadable":             {data: map[string][]byte{caCertKey: []byte("x"), caKeyKey: []byte("y")}, rotated: true},
		"with another CA's key":  {data: map[string][]byte{caCertKey: fresh.CertPEM, caKeyKey: expiring.KeyPEM}, rotated: true, previous: fresh.CertPEM},
		"expiring, with its own": {data: withPrevious(caData(expiring), expired.CertPEM), rotated: true, previous: expiring.CertPEM},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, made, err := a.next(tc.data, now)
			if err != nil {
				t.Fatal(err)
			}
			if (made != nil) != tc.rotated {
				t.Fatalf("rotated = %t, want %t", made != nil, tc.rotated)
			}
			if !tc.rotated {
				if diff := cmp.Diff(tc.data, got); diff != "" {
					t.Fatalf("data changed (-want +got):\n%s", diff)
				}
				return
			}
			if !bytes.Equal(got[caCertKey], made.CertPEM) || !bytes.Equal(got[caKeyKey], made.KeyPEM) {
				t.Error("the new CA is not the Secret's")
			}
			if diff := cmp.Diff(tc.previous, got[caPreviousKey]); diff != "" {
				t.Errorf("previous (-want +got):\n%s", diff)
			}
		})
	}
}

func caData(ca *pki.CA) map[string][]byte {
	return map[string][]byte{caCertKey: ca.CertPEM, caKeyKey: ca.KeyPEM}
}

func withPrevious(data map[string][]byte, previous []byte) map[string][]byte {
	if previous != nil {
		data[caPreviousKey] = previous
	}
	return data
}

// A CA near expiry is replaced; the previous one stays trusted, so a peer
// still holding a certificate of it gets in, until it expires; Changed
// fires at both steps. Which certificates are presented meanwhile is
// TestCertificatesAfterRotation's.
func TestRotation(t *testing.T) {
	clk := newClock()
	t0 := clk.Now()
	as, oldCA := sharing(t, clk, "node-a")
	a := as[0]
	data0 := caData(oldCA)
	changed := a.Changed()

	t1 := oldCA.Cert.NotAfter.Add(-a.opts.RotateBefore + time.Hour)
	clk.Set(t1)
	data1, newCA, err := a.next(data0, t1)
	if err != nil || newCA == nil {
		t.Fatalf("not rotated at %s of a CA valid until %s: %v", t1.Sub(t0), oldCA.Cert.NotAfter.Sub(t0), err)
	}
	if err := a.adopt(data1, t1, t1); err != nil {
		t.Fatal(err)
	}
	fired(t, changed, "after the rotation")
	if diff := cmp.Diff(string(newCA.CertPEM)+string(oldCA.CertPEM), string(a.CABundle())); diff != "" {
		t.Errorf("bundle after the rotation (-want +got):\n%s", diff)
	}
	oldPeer := issue(t, oldCA, managerSpec("node-b", t1))
	// It read the Secret since and trusts the new CA, but still presents
	// its certificate of the old one.
	admits(t, handshake(t, a.ServerConfig(), &tls.Config{
		Certificates: []tls.Certificate{oldPeer}, RootCAs: pool(newCA.Cert, oldCA.Cert), ServerName: "node-a",
		NextProtos: []string{"http/1.1"}, Time: clk.Now,
	}), "node-b")

	changed = a.Changed()
	t2 := oldCA.Cert.NotAfter.Add(time.Minute)
	clk.Set(t2)
	if _, again, err := a.next(data1, t2); err != nil || again != nil {
		t.Fatalf("the new CA rotated again: %v", err)
	}
	if err := a.adopt(data1, t1, t2); err != nil {
		t.Fatal(err)
	}
	fired(t, changed, "after the previous CA expired")
	if diff := cmp.Diff(string(newCA.CertPEM), string(a.CABundle())); diff != "" {
		t.Errorf("bundle after the previous CA expired (-want +got):\n%s", diff)
	}
}

// This node's certificate is kept until a third of it is left.
func TestNodeCertificateRenewal(t *testing.T) {
	clk := newClock()
	as, ca := sharing(t, clk, "node-a")
	a := as[0]
	first := nodeLeaf(a)
	life := first.NotAfter.Sub(first.NotBefore)
	changed := a.Changed()
	tests := []struct {
		at      time.Time
		renewed bool
	}{
		{first.NotAfter.Add(-life/3 - time.Minute), false},
		{first.NotAfter.Add(-life/3 + time.Minute), true},
	}
	for _, tc := range tests {
		clk.Set(tc.at)
		if err := a.adopt(caData(ca), time.Time{}, tc.at); err != nil {
			t.Fatal(err)
		}
		if renewed := !nodeLeaf(a).Equal(first); renewed != tc.renewed {
			t.Errorf("at %s of %s: renewed = %t, want %t", tc.at.Sub(first.NotBefore), life, renewed, tc.renewed)
		}
	}
	select {
	case <-changed:
		t.Error("Changed fired with the same CA")
	default:
	}
}

func nodeLeaf(a *Authority) *x509.Certificate { return a.state.Load().node.Leaf }

func fired(t *testing.T, ch <-chan struct{}, when string) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Errorf("Changed did not fire %s", when)
	}
}

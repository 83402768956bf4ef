package peerca

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/internal/pki"
)

// clock is a settable time shared by the Authorities and peers of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// newAuthority is an Authority of node on clk; c may be nil for a test
// that hands it CA data with adopt.
func newAuthority(t *testing.T, c client.Client, secret types.NamespacedName, node string, clk *clock) *Authority {
	t.Helper()
	a, err := New(c, Options{Secret: secret, Node: node, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var testSecret = types.NamespacedName{Namespace: "afe-system", Name: "afe-peer-ca"}

// sharing is Authorities of the nodes sharing one new CA, without an API
// server, and that CA.
func sharing(t *testing.T, clk *clock, nodes ...string) ([]*Authority, *pki.CA) {
	t.Helper()
	var as []*Authority
	for _, n := range nodes {
		as = append(as, newAuthority(t, nil, testSecret, n, clk))
	}
	data, _, err := as[0].next(nil, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if err := a.adopt(data, time.Time{}, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := pki.LoadCA(data[caCertKey], data[caKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	return as, ca
}

// managerSpec is what a manager certificate of node says, valid a day
// from now.
func managerSpec(node string, now time.Time) pki.Spec {
	return pki.Spec{
		CommonName:   node,
		Organization: Organization,
		DNSNames:     []string{node},
		Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Now:          now,
		Validity:     24 * time.Hour,
	}
}

func issue(t *testing.T, ca *pki.CA, spec pki.Spec) tls.Certificate {
	t.Helper()
	pair, err := ca.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func pool(cas ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca)
	}
	return p
}

// handshaken is how a handshake went: the server's view and error, and
// the client's handshake error (under TLS 1.3 a client finishes its
// handshake before the server has judged its certificate).
type handshaken struct {
	server    tls.ConnectionState
	serverErr error
	clientErr error
}

// handshake runs a TLS handshake between the configs over loopback TCP.
func handshake(t *testing.T, server, client *tls.Config) handshaken {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	var h handshaken
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			h.serverErr = err
			return
		}
		defer func() { _ = conn.Close() }()
		tc := tls.Server(conn, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		h.serverErr = tc.Handshake()
		h.server = tc.ConnectionState()
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	tc := tls.Client(conn, client)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	h.clientErr = tc.Handshake()
	// The server reads the client's last flight before it is closed.
	<-done
	return h
}

package peerca

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"afe.dev/sandbox/internal/pki"
)

// The peer listener admits a client only with a manager certificate of a
// trusted CA, valid now, for client auth, and names its node.
func TestServerConfigVerifiesClients(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	as, ca := sharing(t, clk, "node-a")
	a := as[0]
	other, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	noOrg := managerSpec("node-b", now)
	noOrg.Organization = ""
	serverOnly := managerSpec("node-b", now)
	serverOnly.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	otherName := managerSpec("node-b", now)
	otherName.DNSNames = []string{"node-c"}
	expired := managerSpec("node-b", now.Add(-48*time.Hour))
	plain, err := ca.IssueClient("node-b")
	if err != nil {
		t.Fatal(err)
	}
	plainCert, err := tls.X509KeyPair(plain.CertPEM, plain.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := a.ServingCertificate([]string{"node-b"}, nil)(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		certs []tls.Certificate
		node  string // empty: refused
	}{
		"a manager of this CA":                  {certs: []tls.Certificate{issue(t, ca, managerSpec("node-b", now))}, node: "node-b"},
		"a manager's but for its Organization":  {certs: []tls.Certificate{issue(t, ca, noOrg)}},
		"the serving certificate of this CA":    {certs: []tls.Certificate{*serving}},
		"a plain client certificate of this CA": {certs: []tls.Certificate{plainCert}},
		"a manager of another CA":               {certs: []tls.Certificate{issue(t, other, managerSpec("node-b", now))}},
		"an expired manager certificate":        {certs: []tls.Certificate{issue(t, ca, expired)}},
		"a manager's without client-auth usage": {certs: []tls.Certificate{issue(t, ca, serverOnly)}},
		"a manager's naming another DNS name":   {certs: []tls.Certificate{issue(t, ca, otherName)}},
		"no certificate":                        {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := &tls.Config{
				Certificates: tc.certs,
				RootCAs:      pool(ca.Cert),
				ServerName:   "node-a",
				NextProtos:   []string{"h2", "http/1.1"},
				Time:         clk.Now,
			}
			admits(t, handshake(t, a.ServerConfig(), client), tc.node)
		})
	}
}

// admits checks the peer listener's side of a handshake: refused when
// node is empty, else admitted as node, over HTTP/1.1.
func admits(t *testing.T, h handshaken, node string) {
	t.Helper()
	if node == "" {
		if h.serverErr == nil {
			t.Fatalf("admitted, as %+v", h.server.PeerCertificates[0].Subject)
		}
		return
	}
	if h.serverErr != nil || h.clientErr != nil {
		t.Fatalf("refused: server %v, client %v", h.serverErr, h.clientErr)
	}
	if got, ok := PeerNode(&h.server); !ok || got != node {
		t.Errorf("PeerNode = %q, %t; want %q", got, ok, node)
	}
	if h.server.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1 only", h.server.NegotiatedProtocol)
	}
}

// A manager reaching a node's manager accepts only that node's manager
// certificate of a trusted CA, valid now, for server auth.
func TestClientConfigVerifiesServers(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	as, ca := sharing(t, clk, "node-a")
	a := as[0]
	other, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	noOrg := managerSpec("node-b", now)
	noOrg.Organization = ""
	clientOnly := managerSpec("node-b", now)
	clientOnly.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	serving, err := a.ServingCertificate([]string{"node-b"}, nil)(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cert tls.Certificate
		ok   bool
	}{
		"the manager of that node":              {issue(t, ca, managerSpec("node-b", now)), true},
		"the manager of another node":           {issue(t, ca, managerSpec("node-c", now)), false},
		"a manager of another CA":               {issue(t, other, managerSpec("node-b", now)), false},
		"an expired manager certificate":        {issue(t, ca, managerSpec("node-b", now.Add(-48*time.Hour))), false},
		"a manager's without server-auth usage": {issue(t, ca, clientOnly), false},
		"a manager's but for its Organization":  {issue(t, ca, noOrg), false},
		"the serving certificate for that name": {*serving, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			server := &tls.Config{Certificates: []tls.Certificate{tc.cert}, Time: clk.Now}
			h := handshake(t, server, a.ClientConfig("node-b"))
			if (h.clientErr == nil) != tc.ok {
				t.Fatalf("client handshake: %v, want ok=%t", h.clientErr, tc.ok)
			}
		})
	}
}

// Two managers of the same CA reach each other, each naming the other.
func TestManagersReachEachOther(t *testing.T) {
	as, _ := sharing(t, newClock(), "node-a", "node-b")
	reachEachOther(t, as[0], as[1])
}

// reachEachOther handshakes from a to b and from b to a with their own
// configs: each gets in, named as its node.
func reachEachOther(t *testing.T, a, b *Authority) {
	t.Helper()
	for _, pair := range [][2]*Authority{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		h := handshake(t, to.ServerConfig(), from.ClientConfig(to.opts.Node))
		if h.serverErr != nil || h.clientErr != nil {
			t.Fatalf("%s to %s: server %v, client %v", from.opts.Node, to.opts.Node, h.serverErr, h.clientErr)
		}
		if node, ok := PeerNode(&h.server); !ok || node != from.opts.Node {
			t.Errorf("%s to %s: PeerNode = %q, %t", from.opts.Node, to.opts.Node, node, ok)
		}
	}
}

// PeerNode names no one without a verified chain.
func TestPeerNodeNeedsAVerifiedChain(t *testing.T) {
	clk := newClock()
	_, ca := sharing(t, clk, "node-a")
	leaf := issue(t, ca, managerSpec("node-b", clk.Now())).Leaf
	tests := map[string]*tls.ConnectionState{
		"no connection state":  nil,
		"an unverified leaf":   {PeerCertificates: []*x509.Certificate{leaf}},
		"an empty chain":       {PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{}}},
		"no peer certificates": {},
	}
	for name, state := range tests {
		t.Run(name, func(t *testing.T) {
			if node, ok := PeerNode(state); ok {
				t.Fatalf("PeerNode = %q", node)
			}
		})
	}
	verified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, ca.Cert}}}
	if node, ok := PeerNode(verified); !ok || node != "node-b" {
		t.Fatalf("verified: PeerNode = %q, %t", node, ok)
	}
}

// Before the first Ensure there is nothing to present: handshakes fail
// rather than present nothing.
func TestNoCertificateBeforeEnsure(t *testing.T) {
	a := newAuthority(t, nil, testSecret, "node-a", newClock())
	if _, err := a.ServerConfig().GetConfigForClient(nil); err == nil {
		t.Error("server config before Ensure")
	}
	if _, err := a.ClientConfig("node-b").GetClientCertificate(nil); err == nil {
		t.Error("client certificate before Ensure")
	}
	if _, err := a.ServingCertificate([]string{"x"}, nil)(nil); err == nil {
		t.Error("serving certificate before Ensure")
	}
}

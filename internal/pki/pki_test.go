package pki

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIssued(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("proxy")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer("svc", []string{"svc.ns.svc", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cert  []byte
		roots *CA
		opts  x509.VerifyOptions
		ok    bool
	}{
		"client by its CA":            {client.CertPEM, ca, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true},
		"client by another CA":        {client.CertPEM, other, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, false},
		"client is no server":         {client.CertPEM, ca, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, false},
		"server for its service name": {server.CertPEM, ca, x509.VerifyOptions{DNSName: "svc.ns.svc"}, true},
		"server for loopback":         {server.CertPEM, ca, x509.VerifyOptions{DNSName: "127.0.0.1"}, true},
		"server for another name":     {server.CertPEM, ca, x509.VerifyOptions{DNSName: "other.ns.svc"}, false},
		"server is no client":         {server.CertPEM, ca, x509.VerifyOptions{DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opts.Roots = x509.NewCertPool()
			tc.opts.Roots.AddCert(tc.roots.Cert)
			_, err := parse(t, tc.cert).Verify(tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("verify: %v, want ok=%t", err, tc.ok)
			}
		})
	}
}

func TestFrontProxy(t *testing.T) {
	flags, err := FrontProxy(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(flags["requestheader-client-ca-file"])
	if err != nil {
		t.Fatal(err)
	}
	cert, err := os.ReadFile(flags["proxy-client-cert-file"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(flags["proxy-client-key-file"]); err != nil {
		t.Fatal(err)
	}
	c := parse(t, cert)
	if c.Subject.CommonName != flags["requestheader-allowed-names"] {
		t.Fatalf("client certificate is %q, the allowed name %q", c.Subject.CommonName, flags["requestheader-allowed-names"])
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the proxy's certificate does not verify against the published CA: %v", err)
	}
}

func TestLoadCA(t *testing.T) {
	ca, err := NewCA("kept-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueClient("leaf")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cert, key []byte
		ok        bool
	}{
		"its own certificate and key": {ca.CertPEM, ca.KeyPEM, true},
		"the key of another CA":       {ca.CertPEM, other.KeyPEM, false},
		"a certificate that is no CA": {leaf.CertPEM, leaf.KeyPEM, false},
		"a certificate as the key":    {ca.CertPEM, ca.CertPEM, false},
		"no PEM":                      {[]byte("garbage"), ca.KeyPEM, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			loaded, err := LoadCA(tc.cert, tc.key)
			if (err == nil) != tc.ok {
				t.Fatalf("LoadCA: %v, want ok=%t", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			// The loaded CA signs what the original's certificate verifies.
			pair, err := loaded.IssueClient("by-loaded")
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			if _, err := parse(t, pair.CertPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestIssueSpec(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCAAt("short-ca", now, 10*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ca.Cert.NotAfter, now.Add(10*24*time.Hour); !got.Equal(want) {
		t.Errorf("CA valid until %s, want %s", got, want)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tests := map[string]struct {
		spec     Spec
		org      []string
		notAfter time.Time
	}{
		"with an organization": {
			spec:     Spec{CommonName: "n1", Organization: "group", DNSNames: []string{"n1"}, Usages: both, Now: now, Validity: 24 * time.Hour},
			org:      []string{"group"},
			notAfter: now.Add(24 * time.Hour),
		},
		"without one": {
			spec:     Spec{CommonName: "n1", DNSNames: []string{"n1"}, Usages: both, Now: now, Validity: 24 * time.Hour},
			notAfter: now.Add(24 * time.Hour),
		},
		"never past the CA": {
			spec:     Spec{CommonName: "n1", DNSNames: []string{"n1"}, Usages: both, Now: now, Validity: 30 * 24 * time.Hour},
			notAfter: ca.Cert.NotAfter,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pair, err := ca.Issue(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			c := parse(t, pair.CertPEM)
			if diff := cmp.Diff(tc.org, c.Subject.Organization); diff != "" {
				t.Errorf("organization (-want +got):\n%s", diff)
			}
			if !c.NotAfter.Equal(tc.notAfter) || !c.NotBefore.Equal(now.Add(-time.Hour)) {
				t.Errorf("valid %s to %s, want %s to %s", c.NotBefore, c.NotAfter, now.Add(-time.Hour), tc.notAfter)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			for _, usage := range both {
				if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "n1", CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("usage %v: %v", usage, err)
				}
			}
		})
	}
}

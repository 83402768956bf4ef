package pki

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
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

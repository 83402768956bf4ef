// Package pki makes the small certificate authorities the project needs of
// its own: the front proxy's (the Kubernetes API server's client identity
// towards an aggregated API, and the CA its requests are verified with) and
// the access API's serving certificate. Keys are ECDSA P-256; certificates
// are valid for a year from an hour ago (clocks drift).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long a certificate made here is valid.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// CertPEM is the CA's certificate, PEM-encoded.
	CertPEM []byte
}

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA of that common name.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(commonName)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA %s: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// IssueClient signs a client certificate of that common name.
func (ca *CA) IssueClient(commonName string) (Pair, error) {
	return ca.issue(commonName, x509.ExtKeyUsageClientAuth, nil, nil)
}

// IssueServer signs a serving certificate for the DNS names and IPs.
func (ca *CA) IssueServer(commonName string, dnsNames []string, ips []net.IP) (Pair, error) {
	return ca.issue(commonName, x509.ExtKeyUsageServerAuth, dnsNames, ips)
}

func (ca *CA) issue(commonName string, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl, err := template(commonName)
	if err != nil {
		return Pair{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	tmpl.DNSNames, tmpl.IPAddresses = dnsNames, ips
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign %s: %w", commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func template(commonName string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Validity),
	}, nil
}

// FrontProxyClientName is the common name of the front proxy's client
// certificate: the only name an aggregated API server admits as the proxy.
const FrontProxyClientName = "afe-front-proxy-client"

// FrontProxy writes, under dir, a front-proxy CA (front-proxy-ca.crt) and a
// client certificate it signed (front-proxy-client.crt, .key), and returns
// the kube-apiserver flags (without dashes) that make it an aggregator: it
// presents that certificate to aggregated API servers, and publishes the CA
// and the request headers in kube-system/extension-apiserver-authentication
// for them to verify it with. Files are made fresh each time.
func FrontProxy(dir string) (map[string]string, error) {
	if dir == "" {
		return nil, errors.New("front proxy: no folder")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("afe-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	client, err := ca.IssueClient(FrontProxyClientName)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     ca.CertPEM,
		"front-proxy-client.crt": client.CertPEM,
		"front-proxy-client.key": client.KeyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return map[string]string{
		"requestheader-client-ca-file":       filepath.Join(dir, "front-proxy-ca.crt"),
		"requestheader-allowed-names":        FrontProxyClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             filepath.Join(dir, "front-proxy-client.crt"),
		"proxy-client-key-file":              filepath.Join(dir, "front-proxy-client.key"),
	}, nil
}

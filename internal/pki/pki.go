// Package pki makes the small certificate authorities the project needs of
// its own: the front proxy's (the Kubernetes API server's client identity
// towards an aggregated API, and the CA its requests are verified with) and
// the access API's serving certificate, and the managers' shared CA in
// per-node mode (internal/peerca). Keys are ECDSA P-256; certificates are
// valid for a year from an hour ago (clocks drift) unless told otherwise.
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

// Validity is how long a certificate made here is valid unless told
// otherwise.
const Validity = 365 * 24 * time.Hour

// backdate is how long before its making a certificate is valid from:
// clocks drift.
const backdate = time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// CertPEM is the CA's certificate, PEM-encoded.
	CertPEM []byte
	// KeyPEM is the CA's private key, PEM-encoded, for a CA kept in a
	// Secret (LoadCA reads both back).
	KeyPEM []byte
}

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// Spec is what a certificate Issue signs says of its holder.
type Spec struct {
	CommonName string
	// Organization, when set, is the certificate's O: a group the holder
	// belongs to, which a verifier may require.
	Organization string
	DNSNames     []string
	IPs          []net.IP
	Usages       []x509.ExtKeyUsage
	// Now and Validity place the certificate in time: valid from an hour
	// before Now for Validity, never past the CA. Zero values mean
	// time.Now() and the package's Validity.
	Now      time.Time
	Validity time.Duration
}

// NewCA makes a self-signed CA of that common name, valid for Validity.
func NewCA(commonName string) (*CA, error) {
	return NewCAAt(commonName, time.Now(), Validity)
}

// NewCAAt makes a self-signed CA of that common name, valid from an hour
// before now for validity: for a CA its holder rotates by its own clock.
func NewCAAt(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(commonName, now, validity)
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
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA is the CA of a certificate and key as NewCA encodes them
// (CertPEM, KeyPEM). It refuses a certificate that is no CA and a key that
// is not the certificate's.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is no CA", cert.Subject.CommonName)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, errors.New("no EC PRIVATE KEY PEM block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("the key is not that of CA %s", cert.Subject.CommonName)
	}
	return &CA{Cert: cert, key: key, CertPEM: encodeCert(cert.Raw), KeyPEM: pem.EncodeToMemory(block)}, nil
}

// ParseCertificate is the certificate of the first PEM block of data.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no CERTIFICATE PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

// IssueClient signs a client certificate of that common name.
func (ca *CA) IssueClient(commonName string) (Pair, error) {
	return ca.Issue(Spec{CommonName: commonName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// IssueServer signs a serving certificate for the DNS names and IPs.
func (ca *CA) IssueServer(commonName string, dnsNames []string, ips []net.IP) (Pair, error) {
	return ca.Issue(Spec{CommonName: commonName, DNSNames: dnsNames, IPs: ips, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// Issue signs a certificate with a new key as spec says.
func (ca *CA) Issue(spec Spec) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	if spec.Now.IsZero() {
		spec.Now = time.Now()
	}
	tmpl, err := template(spec.CommonName, spec.Now, spec.Validity)
	if err != nil {
		return Pair{}, err
	}
	if spec.Organization != "" {
		tmpl.Subject.Organization = []string{spec.Organization}
	}
	// A certificate outliving its CA would only fail verification later.
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = spec.Usages
	tmpl.DNSNames, tmpl.IPAddresses = spec.DNSNames, spec.IPs
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign %s: %w", spec.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

func template(commonName string, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	if validity == 0 {
		validity = Validity
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(validity),
	}, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
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

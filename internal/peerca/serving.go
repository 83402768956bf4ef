package peerca

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"sync"

	"afe.dev/sandbox/internal/pki"
)

// ServingCertificate is a GetCertificate for a TLS server other than the
// peer listener (the access API): a certificate for those DNS names and IPs
// from the current CA, reissued when a third of it is left or the CA
// changed, a certificate of the replaced CA being kept as the node's is,
// for 2×Refresh after the rotation: a caBundle published before it holds
// only that CA. It carries no Organization: it is no manager's identity.
// Its clients verify it with CABundle.
func (a *Authority) ServingCertificate(dnsNames []string, ips []net.IP) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s := &serving{a: a, dnsNames: slices.Clone(dnsNames), ips: slices.Clone(ips)}
	return s.get
}

type serving struct {
	a        *Authority
	dnsNames []string
	ips      []net.IP

	mu   sync.Mutex
	ca   *x509.Certificate
	cert *tls.Certificate
}

func (s *serving) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st := s.a.state.Load()
	if st == nil {
		return nil, errNotEnsured
	}
	now := s.a.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && st.keeps(s.ca, s.cert.Leaf, now) {
		return s.cert, nil
	}
	name := "afe-access"
	if len(s.dnsNames) > 0 {
		name = s.dnsNames[0]
	}
	pair, err := st.ca.Issue(pki.Spec{
		CommonName: name,
		DNSNames:   s.dnsNames,
		IPs:        s.ips,
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		Now:        now,
		Validity:   s.a.opts.CertValidity,
	})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, err
	}
	s.a.log.Info("Issued a serving certificate", "name", name, "notAfter", cert.Leaf.NotAfter)
	s.ca, s.cert = st.ca.Cert, &cert
	return s.cert, nil
}

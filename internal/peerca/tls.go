package peerca

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
)

// errNotEnsured is what a handshake gets before the first Ensure.
var errNotEnsured = errors.New("peer CA: not read yet")

// ServerConfig is the peer listener's TLS config. It presents this node's
// certificate and requires one of a manager from the client, verified
// against the CAs trusted at the time of the handshake, with client-auth
// usage. HTTP/1.1 only: forwarded requests may be upgraded (exec, attach),
// which HTTP/2 cannot carry.
func (a *Authority) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: a.nodeCertificate,
		// A config per handshake, so that the pool follows rotation.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := a.state.Load()
			if st == nil {
				return nil, errNotEnsured
			}
			return &tls.Config{
				MinVersion:     tls.VersionTLS12,
				NextProtos:     []string{"http/1.1"},
				GetCertificate: a.nodeCertificate,
				ClientAuth:     tls.RequireAndVerifyClientCert,
				ClientCAs:      st.trusted,
				Time:           a.now,
				// A resumed session would skip the verification against
				// the CAs trusted now.
				SessionTicketsDisabled: true,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if _, ok := PeerNode(&cs); !ok {
						return errors.New("peer CA: the client's certificate is not a manager's")
					}
					return nil
				},
			}, nil
		},
	}
}

// ClientConfig is the TLS config to reach node's manager: it presents this
// node's certificate and accepts only a manager certificate of that node,
// with server-auth usage, verified against the CAs trusted at the time of
// the handshake.
func (a *Authority) ClientConfig(node string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		NextProtos:           []string{"http/1.1"},
		ServerName:           node,
		GetClientCertificate: a.nodeClientCertificate,
		// crypto/tls verifies a server against a RootCAs fixed in the
		// config; VerifyConnection does the whole verification instead
		// (chain, usage, time, node), against the pool of the moment.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return a.verifyServer(cs, node)
		},
	}
}

func (a *Authority) verifyServer(cs tls.ConnectionState, node string) error {
	st := a.state.Load()
	if st == nil {
		return errNotEnsured
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer CA: the server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         st.trusted,
		Intermediates: intermediates,
		DNSName:       node,
		CurrentTime:   a.now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("peer CA: the manager of node %s: %w", node, err)
	}
	if got, ok := managerNode(leaf); !ok || got != node {
		return fmt.Errorf("peer CA: the server's certificate is not that of the manager of node %s", node)
	}
	return nil
}

// PeerNode is the node named by the verified peer certificate of a
// connection (r.TLS on the peer listener): ok only when its chain was
// verified and it is a manager's, carrying Organization with its CN its
// only DNS name.
func PeerNode(state *tls.ConnectionState) (node string, ok bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", false
	}
	return managerNode(state.VerifiedChains[0][0])
}

func managerNode(c *x509.Certificate) (string, bool) {
	node := c.Subject.CommonName
	if !slices.Contains(c.Subject.Organization, Organization) ||
		len(c.DNSNames) != 1 || c.DNSNames[0] != node ||
		len(validation.IsDNS1123Subdomain(node)) > 0 {
		return "", false
	}
	return node, true
}

func (a *Authority) nodeCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st := a.state.Load()
	if st == nil {
		return nil, errNotEnsured
	}
	return st.node, nil
}

func (a *Authority) nodeClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return a.nodeCertificate(nil)
}

package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// answerPoll is how often the server asks itself whether it answers,
// before registering; answerTimeout bounds one such request.
const (
	answerPoll    = 20 * time.Millisecond
	answerTimeout = 2 * time.Second
)

// errNotServing is the readiness check's error until the access API is
// served (and registered, with Options.Register).
var errNotServing = errors.New("the access API is not served yet")

// Ready is the manager's readiness check of the access API: ready once the
// server answers on its port and, with Options.Register, its APIService
// is written. A Deployment's Service then reaches only a manager that
// serves it, and the aggregator checks the APIService again when one
// becomes ready.
func (s *Server) Ready(*http.Request) error {
	if !s.serving.Load() {
		return errNotServing
	}
	return nil
}

// awaitAnswer waits until the server answers an HTTPS request on its
// listener, as the aggregator's availability check will: registering
// before would have the aggregator find no server, mark the APIService
// unavailable and back off before checking again. It ends early when a
// server stops (errs) or ctx ends.
func (s *Server) awaitAnswer(ctx context.Context, errs <-chan error) error {
	c := &http.Client{Timeout: answerTimeout, Transport: &http.Transport{TLSClientConfig: s.selfTLS()}}
	defer c.CloseIdleConnections()
	url := "https://" + s.selfAddr() + "/apis/" + Group + "/" + Version
	tick := time.NewTicker(answerPoll)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		// Any answer is one: without credentials it is 401. A certificate
		// the CA does not verify is one too (the aggregator will say so
		// in the APIService's status).
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if verify := new(tls.CertificateVerificationError); errors.As(err, &verify) {
			s.log.Info("The access API's serving certificate is not verified by its CA", "error", err.Error())
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return fmt.Errorf("access API: %w", err)
		case <-tick.C:
		}
	}
}

// selfTLS verifies the server as the aggregator does: the CA registered
// in the APIService, and the Service's name.
func (s *Server) selfTLS() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.opts.Service.Name + "." + s.opts.Service.Namespace + ".svc"}
	if pool := x509.NewCertPool(); pool.AppendCertsFromPEM(s.caBundle()) {
		cfg.RootCAs = pool
	}
	return cfg
}

// selfAddr is the listener's address, loopback when it binds every one.
func (s *Server) selfAddr() string {
	addr := s.listener.Addr().(*net.TCPAddr)
	if addr.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(addr.Port))
	}
	return addr.String()
}

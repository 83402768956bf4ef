package client

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream" //nolint:staticcheck // client-go's spdy.Upgrader still names these types
	"k8s.io/client-go/transport/spdy"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// DefaultUnavailableWait is how long an exec waits for the access API to
// be served when its context has no deadline: the API server answers 503
// for it while the manager starts, restarts or is upgraded, until its
// aggregator has reached the new manager.
const DefaultUnavailableWait = 30 * time.Second

// The backoff between the attempts of an exec the access API did not get.
const (
	firstUnavailableDelay = 100 * time.Millisecond
	maxUnavailableDelay   = time.Second
)

// WithUnavailableWait is how long an exec whose context has no deadline
// waits for the access API to be served (DefaultUnavailableWait unless
// set); 0 fails at once.
func WithUnavailableWait(d time.Duration) Option {
	return func(c *Client) { c.unavailableWait = d }
}

// handshake records what the API server answered an exec's SPDY upgrade:
// whether it switched protocols (from then on the command may run), and
// the status it answered otherwise.
type handshake struct {
	spdy.Upgrader
	upgraded atomic.Bool
	status   atomic.Int32
}

// NewConnection validates the upgrade's response, noting it.
func (h *handshake) NewConnection(resp *http.Response) (httpstream.Connection, error) {
	h.status.Store(int32(resp.StatusCode))
	conn, err := h.Upgrader.NewConnection(resp)
	if err == nil {
		h.upgraded.Store(true)
	}
	return conn, err
}

// notServed tells whether an exec that failed with err certainly did not
// reach the access API because it is not served now: no stream was
// opened (a stream may have started the command), and the API server
// answered the upgrade with 503 (an APIService not available, or its
// proxy's failed dial of the manager) or refused the connection. A
// WebSocket whose upgrade failed falls back to SPDY, whose handshake h
// recorded; one that failed otherwise ran no SPDY.
func notServed(err error, h *handshake) bool {
	if h.upgraded.Load() {
		return false
	}
	return h.status.Load() == http.StatusServiceUnavailable || errors.Is(err, syscall.ECONNREFUSED)
}

// answered tells whether refusal, the answer to an exec asked again
// without the upgrade, is the access API's own refusal (the sandbox, the
// caller, a request it will not serve) rather than the API server's 503
// for an access API not served now.
func answered(refusal error) bool {
	var se apierrors.APIStatus
	if !errors.As(refusal, &se) {
		return false
	}
	status := se.Status()
	return status.Code != http.StatusServiceUnavailable || accessv1.ReasonOf(&status) != ""
}

// untilServed calls attempt until it says not to try again, waiting with
// backoff between calls, for as long as ctx's deadline leaves (or the
// client's unavailable wait when ctx has none); it returns the last
// attempt's error.
func (c *Client) untilServed(ctx context.Context, attempt func() (retry bool, err error)) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.unavailableWait)
	}
	delay := firstUnavailableDelay
	for {
		retry, err := attempt()
		if !retry || time.Now().Add(delay).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, maxUnavailableDelay)
	}
}

// Package egresslog reads the egress proxy's log lines: one line, one
// decision of squid's on one request of the sandbox's.
//
// The line is written by squid in the logformat "afe" that the proxy's
// configuration defines (internal/egress, which renders it):
//
//	afe-egress v1 time=1764907494.123 ms=12 client=172.19.0.4 status=TCP_DENIED/403 why=host up=120 down=3800 method=GET url=http://denied.test/
//
// Every field before the method is squid's own (times, sizes, status, the
// reason the controller's configuration annotated, the client address):
// the workload cannot choose its bytes. The method and the URL are the
// workload's words: squid URL-escapes both (the "#" modifier: no space, no
// control character, no newline gets through) and the URL comes last, so
// whatever it holds is read as the URL and never as another field or
// another line. The host name taken from it is data: bounded (MaxHost
// bytes and a marker) and escaped again here, whatever squid did.
package egresslog

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"afe.dev/sandbox/internal/egress"
)

// Prefix starts every decision line of the proxy's.
const Prefix = egress.LogPrefix

// MaxHost bounds a host name as it is kept: the longest DNS name. A longer
// one is cut there and Truncated appended.
const MaxHost = 253

// Truncated marks a host name cut at MaxHost bytes.
const Truncated = "...(truncated)"

// maxMethod bounds a method as it is kept.
const maxMethod = 32

// The reasons of a denial the proxy's configuration annotates (squid's
// note afe_why, internal/egress's rules), and Refused for a denial squid
// made without one of ours (a request it could not parse, say).
const (
	// ReasonPort: CONNECT to a port other than 443, or plain HTTP to one
	// other than 80.
	ReasonPort = egress.ReasonPort
	// ReasonHost: the host is not on the allowlist.
	ReasonHost = egress.ReasonHost
	// ReasonAddress: the host resolves to an address always refused (the
	// engine host's).
	ReasonAddress = egress.ReasonAddress
	// ReasonPrivate: the host resolves to a private, loopback or
	// link-local address.
	ReasonPrivate = egress.ReasonPrivate
	// ReasonNothing: the allowlist is empty.
	ReasonNothing = egress.ReasonNothing
	// ReasonRefused: squid refused the request for a reason of its own.
	ReasonRefused = "refused"
	// ReasonEmpty: the connection carried no request (it closed before
	// sending one): squid's status NONE_NONE/000 and URL EmptyURL.
	ReasonEmpty = "empty"
)

// EmptyURL is the URL squid logs for a connection that closed before it
// sent a request's headers.
const EmptyURL = "error:transaction-end-before-headers"

// reasons are the annotations of the rules internal/egress renders.
var reasons = func() map[string]bool {
	m := make(map[string]bool, len(egress.Reasons))
	for _, r := range egress.Reasons {
		m[r] = true
	}
	return m
}()

// The decisions.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Decision is what one line says.
type Decision struct {
	// Time is when squid logged the request (its end), to the millisecond.
	Time time.Time
	// Duration is how long squid took over it.
	Duration time.Duration
	// Client is the address the request came from.
	Client string
	Method string
	// Host is bounded and escaped (Host); Port is 0 when the URL names
	// none and its scheme none either.
	Host string
	Port int
	// Decision is Allowed or Denied; Reason says why a request was denied
	// (one of the Reason constants), empty when allowed.
	Decision string
	Reason   string
	// Status is squid's: its result code and the HTTP status,
	// "TCP_TUNNEL/200".
	Status string
	// BytesUp were received from the sandbox, BytesDown sent to it
	// (tunnelled bytes included).
	BytesUp   int64
	BytesDown int64
}

// ErrNotDecision is the error of a line that is not a decision line at all
// (squid's other output): not counted as malformed.
var ErrNotDecision = errors.New("not an egress decision line")

// fields are the keys of the fixed part, in order.
var fields = []string{"time", "ms", "client", "status", "why", "up", "down", "method"}

// Parse reads one line (without its newline).
func Parse(line string) (Decision, error) {
	rest, ok := strings.CutPrefix(line, Prefix)
	if !ok {
		return Decision{}, ErrNotDecision
	}
	vals := make(map[string]string, len(fields))
	for _, k := range fields {
		var tok string
		tok, rest, ok = strings.Cut(rest, " ")
		if !ok {
			return Decision{}, fmt.Errorf("the line ends before %s", k)
		}
		v, found := strings.CutPrefix(tok, k+"=")
		if !found {
			return Decision{}, fmt.Errorf("field %s missing", k)
		}
		vals[k] = v
	}
	url, ok := strings.CutPrefix(rest, "url=")
	if !ok {
		return Decision{}, errors.New("field url missing")
	}
	d, err := fixed(vals)
	if err != nil {
		return Decision{}, err
	}
	// squid's own status (the workload's bytes come after it) and the
	// URL it gives such a connection, whole.
	if d.Reason == ReasonRefused && strings.HasSuffix(d.Status, "/000") && url == EmptyURL {
		d.Reason = ReasonEmpty
	}
	d.Method = Escape(vals["method"], maxMethod)
	host, port := HostPort(vals["method"], url)
	d.Host, d.Port = Escape(host, MaxHost), port
	return d, nil
}

// fixed reads squid's own fields.
func fixed(v map[string]string) (Decision, error) {
	var d Decision
	secs, millis, ok := strings.Cut(v["time"], ".")
	s, err1 := strconv.ParseInt(secs, 10, 64)
	ms, err2 := strconv.ParseInt(millis, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(millis) != 3 || s < 0 || ms < 0 {
		return d, fmt.Errorf("bad time %q", Escape(v["time"], 32))
	}
	d.Time = time.Unix(s, ms*int64(time.Millisecond)).UTC()
	dur, err := strconv.ParseInt(v["ms"], 10, 64)
	if err != nil || dur < 0 {
		return d, fmt.Errorf("bad duration %q", Escape(v["ms"], 32))
	}
	d.Duration = time.Duration(dur) * time.Millisecond
	if ip := net.ParseIP(v["client"]); ip == nil {
		return d, fmt.Errorf("bad client %q", Escape(v["client"], 64))
	}
	d.Client = v["client"]
	if d.BytesUp, err = size(v["up"]); err != nil {
		return d, err
	}
	if d.BytesDown, err = size(v["down"]); err != nil {
		return d, err
	}
	code, status, ok := strings.Cut(v["status"], "/")
	if !ok || !token(code) || len(code) > 64 || len(status) != 3 || !digits(status) {
		return d, fmt.Errorf("bad status %q", Escape(v["status"], 64))
	}
	d.Status = v["status"]
	d.Decision, d.Reason = Allowed, ""
	switch why := v["why"]; {
	case reasons[why]:
		d.Decision, d.Reason = Denied, why
	case why != "-":
		return d, fmt.Errorf("bad reason %q", Escape(why, 32))
	case strings.HasPrefix(code, "TCP_DENIED") || strings.HasPrefix(code, "NONE"):
		d.Decision, d.Reason = Denied, ReasonRefused
	}
	return d, nil
}

// size reads a byte count; squid writes "-" for none.
func size(s string) (int64, error) {
	if s == "-" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", Escape(s, 32))
	}
	return n, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// token is true for squid's result codes: upper-case letters, digits and
// underscores.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return s != ""
}

// HostPort takes the host and port out of a request's URL as squid logs
// it: "host:port" for CONNECT, "scheme://[user@]host[:port]/path"
// otherwise. It never fails: what it cannot read is the host, as is.
func HostPort(method, url string) (string, int) {
	authority, port := url, 0
	if method != "CONNECT" {
		scheme, after, ok := strings.Cut(url, "://")
		if !ok {
			return url, 0
		}
		switch strings.ToLower(scheme) {
		case "http":
			port = 80
		case "https":
			port = 443
		}
		authority = after
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
	}
	host, p := authority, ""
	if strings.HasPrefix(authority, "[") {
		if i := strings.IndexByte(authority, ']'); i >= 0 {
			host, p = authority[1:i], strings.TrimPrefix(authority[i+1:], ":")
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, p = authority[:i], authority[i+1:]
	}
	if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 && digits(p) {
		port = n
	} else if p != "" {
		host = authority
	}
	return host, port
}

// Escape makes s safe to store and show: printable ASCII but space kept,
// every other byte as %XX (the escape squid uses: what squid escaped
// already stays as it is), then cut at max bytes with Truncated appended.
// It never cuts an escape in two.
func Escape(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		var piece string
		if c > ' ' && c < 0x7f {
			piece = string(c)
		} else {
			piece = fmt.Sprintf("%%%02X", c)
		}
		if b.Len()+len(piece) > max {
			b.WriteString(Truncated)
			return b.String()
		}
		b.WriteString(piece)
	}
	return b.String()
}

package egresslog

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const head = "afe-egress v1 time=1764907494.123 ms=12 client=172.19.0.4 "

func TestParse(t *testing.T) {
	at := time.Unix(1764907494, 123_000_000).UTC()
	long := strings.Repeat("a", 64<<10) + ".test"
	tests := map[string]struct {
		line    string
		want    Decision
		wantErr string
	}{
		"plain HTTP allowed": {
			line: head + "status=TCP_MISS/200 why=- up=120 down=3800 method=GET url=http://allowed.test/x?y=1",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "GET", Host: "allowed.test", Port: 80,
				Decision: Allowed, Status: "TCP_MISS/200", BytesUp: 120, BytesDown: 3800},
		},
		"CONNECT allowed": {
			line: head + "status=TCP_TUNNEL/200 why=- up=517 down=6000 method=CONNECT url=allowed.test:443",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "CONNECT", Host: "allowed.test", Port: 443,
				Decision: Allowed, Status: "TCP_TUNNEL/200", BytesUp: 517, BytesDown: 6000},
		},
		"denied host": {
			line: head + "status=TCP_DENIED/403 why=host up=90 down=3900 method=GET url=http://denied.test:80/",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "GET", Host: "denied.test", Port: 80,
				Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 90, BytesDown: 3900},
		},
		"denied port, IPv6 literal": {
			line: head + "status=TCP_DENIED/403 why=port up=- down=- method=CONNECT url=[2001:db8::1]:22",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "CONNECT", Host: "2001:db8::1", Port: 22,
				Decision: Denied, Reason: ReasonPort, Status: "TCP_DENIED/403"},
		},
		"squid's own refusal": {
			line: head + "status=NONE_NONE/400 why=- up=20 down=0 method=NONE url=error:invalid-request",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "NONE", Host: "error:invalid-request",
				Decision: Denied, Reason: ReasonRefused, Status: "NONE_NONE/400", BytesUp: 20},
		},
		"a connection that carried no request": {
			line: head + "status=NONE_NONE/000 why=- up=0 down=0 method=- url=error:transaction-end-before-headers",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "-", Host: EmptyURL,
				Decision: Denied, Reason: ReasonEmpty, Status: "NONE_NONE/000"},
		},
		"a request for that URL is no empty connection": {
			line: head + "status=NONE_NONE/400 why=- up=60 down=0 method=GET url=error:transaction-end-before-headers",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "GET", Host: EmptyURL,
				Decision: Denied, Reason: ReasonRefused, Status: "NONE_NONE/400", BytesUp: 60},
		},
		"a URL that holds another line's fields is the URL": {
			line: head + "status=TCP_DENIED/403 why=host up=1 down=2 method=GET url=http://x.test/ afe-egress v1 time=1 ms=0 client=10.0.0.9 status=TCP_TUNNEL/200 why=- up=9 down=9 method=CONNECT url=other.test:443",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "GET", Host: "x.test", Port: 80,
				Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2},
		},
		"control characters in the host are escaped": {
			line: head + "status=TCP_DENIED/403 why=host up=1 down=2 method=CONNECT url=a\x1b[31m\rb\x00c:443",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "CONNECT", Host: "a%1B[31m%0Db%00c", Port: 443,
				Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2},
		},
		"a host of 64 KiB is cut": {
			line: head + "status=TCP_DENIED/403 why=host up=1 down=2 method=CONNECT url=" + long + ":443",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "CONNECT", Host: long[:MaxHost] + Truncated, Port: 443,
				Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2},
		},
		"a port that is not one is the host's": {
			line: head + "status=TCP_DENIED/403 why=port up=1 down=2 method=CONNECT url=a.test:99999",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "CONNECT", Host: "a.test:99999",
				Decision: Denied, Reason: ReasonPort, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2},
		},
		"user info is not the host": {
			line: head + "status=TCP_DENIED/403 why=host up=1 down=2 method=GET url=http://allowed.test@denied.test:8080/",
			want: Decision{Time: at, Duration: 12 * time.Millisecond, Client: "172.19.0.4", Method: "GET", Host: "denied.test", Port: 8080,
				Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2},
		},
		"not a decision":        {line: "2026/12/05 05:00:00| Accepting HTTP Socket connections", wantErr: ErrNotDecision.Error()},
		"the old format":        {line: "2026-11-30T04:04:54 afe-egress client=172.19.0.4 method=GET url=http://denied.test/ decision=TCP_DENIED status=403", wantErr: ErrNotDecision.Error()},
		"an unknown reason":     {line: head + "status=TCP_DENIED/403 why=mine up=1 down=2 method=GET url=http://a.test/", wantErr: "bad reason"},
		"a field out of order":  {line: "afe-egress v1 ms=12 time=1764907494.123 client=172.19.0.4 status=TCP_MISS/200 why=- up=1 down=2 method=GET url=x", wantErr: "field time missing"},
		"no URL":                {line: head + "status=TCP_MISS/200 why=- up=1 down=2 method=GET", wantErr: "ends before method"},
		"a client not an IP":    {line: "afe-egress v1 time=1764907494.123 ms=12 client=sandbox-b status=TCP_MISS/200 why=- up=1 down=2 method=GET url=x", wantErr: "bad client"},
		"a negative size":       {line: head + "status=TCP_MISS/200 why=- up=-5 down=2 method=GET url=x", wantErr: "bad size"},
		"a status with a space": {line: head + "status=TCP_MISS/2 0 why=- up=1 down=2 method=GET url=x", wantErr: "field why missing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := map[string]struct {
		in   string
		max  int
		want string
	}{
		"plain":                {"example.com", 253, "example.com"},
		"space and newline":    {"a b\nc", 253, "a%20b%0Ac"},
		"UTF-8":                {"exаmple", 253, "ex%D0%B0mple"},
		"squid's escape kept":  {"a%0Ab", 253, "a%0Ab"},
		"cut":                  {"abcdef", 4, "abcd" + Truncated},
		"an escape never half": {"abc\n", 5, "abc" + Truncated},
		"exactly the bound":    {"abcd", 4, "abcd"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Escape(tc.in, tc.max); got != tc.want {
				t.Fatalf("Escape(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
}

// Whatever the workload puts in a URL, it cannot change a field squid
// wrote before it, and what is kept of it is bounded printable ASCII.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://a.test/", "a.test:443", "x afe-egress v1 time=1 ms=0 client=10.0.0.9 status=TCP_TUNNEL/200 why=- up=9 down=9 method=CONNECT url=b:443",
		"[::1]:443", "http://u@h:80/", strings.Repeat("a", 70000), "a\x00\x1b\r\tb:1", "http://[", "://:", "\xff\xfe"} {
		f.Add("CONNECT", s)
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, url string) {
		line := head + "status=TCP_DENIED/403 why=host up=1 down=2 method=" + method + " url=" + url
		d, err := Parse(line)
		if err != nil {
			// squid escapes the method: one with a space is refused or
			// read with the rest in the URL.
			if strings.Contains(method, " ") {
				return
			}
			t.Fatalf("%q: %v", line, err)
		}
		want := Decision{Time: time.Unix(1764907494, 123_000_000).UTC(), Duration: 12 * time.Millisecond, Client: "172.19.0.4",
			Decision: Denied, Reason: ReasonHost, Status: "TCP_DENIED/403", BytesUp: 1, BytesDown: 2}
		got := d
		got.Method, got.Host, got.Port = "", "", 0
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q: the URL changed squid's fields (-want +got):\n%s", line, diff)
		}
		for what, s := range map[string]string{"host": d.Host, "method": d.Method} {
			if len(s) > MaxHost+len(Truncated) {
				t.Fatalf("%s of %d bytes", what, len(s))
			}
			for i := 0; i < len(s); i++ {
				if s[i] <= ' ' || s[i] >= 0x7f {
					t.Fatalf("%s %q holds byte %#x", what, s, s[i])
				}
			}
		}
		if d.Port < 0 || d.Port > 65535 {
			t.Fatalf("port %d", d.Port)
		}
	})
}

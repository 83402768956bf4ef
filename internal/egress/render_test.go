package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lines are the lines of the text that start with one of the prefixes.
func lines(text string, prefixes ...string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func mustHosts(t *testing.T, entries ...string) []Host {
	t.Helper()
	hosts, err := ParseHosts(entries)
	if err != nil {
		t.Fatal(err)
	}
	return hosts
}

func TestRenderTheRules(t *testing.T) {
	deny := []netip.Prefix{netip.MustParsePrefix("172.17.0.1/32"), netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd00::2/128"), netip.MustParsePrefix("2001:db8::/32")}
	for name, tc := range map[string]struct {
		policy Policy
		want   []string
	}{
		"hosts, denied addresses, private refused": {
			policy: Policy{Hosts: mustHosts(t, "example.com", ".pypi.org"), DenyIPs: deny},
			want: []string{
				// One entry a line, the lines of one ACL adding up.
				"acl afe_allowed dstdomain -n example.com",
				"acl afe_allowed dstdomain -n .pypi.org",
				"acl afe_host dst 172.17.0.1",
				"acl afe_host dst 10.1.0.0/16",
				"acl afe_host dst fd00::2",
				"acl afe_host dst 2001:db8::/32",
				"http_access deny afe_connect !afe_tls afe_why_port",
				"http_access deny !afe_connect !afe_http afe_why_port",
				"http_access deny !afe_allowed afe_why_host",
				"http_access deny afe_host afe_why_address",
				"http_access deny afe_private afe_why_private",
				"http_access allow afe_allowed",
				"http_access deny all",
			},
		},
		"private allowed, no denied address": {
			policy: Policy{Hosts: mustHosts(t, "example.com"), AllowPrivate: true},
			want: []string{
				"acl afe_allowed dstdomain -n example.com",
				"http_access deny afe_connect !afe_tls afe_why_port",
				"http_access deny !afe_connect !afe_http afe_why_port",
				"http_access deny !afe_allowed afe_why_host",
				"http_access allow afe_allowed",
				"http_access deny all",
			},
		},
		// A warm pool member's proxy before its claim.
		"no host admits nothing": {
			policy: Policy{AllowPrivate: true, DenyIPs: deny},
			want:   []string{"http_access deny all afe_why_nothing"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := tc.policy.Render()
			if err != nil {
				t.Fatal(err)
			}
			got := lines(c.Text, "acl afe_allowed ", "acl afe_host ", "http_access ")
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("rules (-want +got):\n%s", d)
			}
		})
	}
}

// The fixed part: every private, loopback, link-local, shared, reserved
// and multicast range, IPv4 and IPv6, the log line the audit reads, and
// the lean settings (about 17 MiB resident rather than 25).
func TestRenderTheFixedPart(t *testing.T) {
	c, err := Policy{}.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{
		"acl afe_private dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 192.168.0.0/16 198.18.0.0/15 224.0.0.0/3 ::/127 fc00::/7 fe80::/10 ff00::/8",
		"logformat afe afe-egress v1 time=%ts.%03tu ms=%tr client=%>a status=%Ss/%03>Hs why=%{afe_why}note up=%>st down=%<st method=%#rm url=%#ru",
		"access_log stdio:/dev/stdout afe",
		"pid_filename /tmp/squid.pid",
		"cache deny all",
		"memory_pools off",
		"client_db off",
		"max_filedescriptors 1024",
		"tls_outgoing_options default-ca=off",
		"mime_table /dev/null",
	} {
		if !strings.Contains(c.Text, "\n"+l+"\n") {
			t.Errorf("missing %q", l)
		}
	}
	for _, r := range Reasons {
		if !strings.Contains(c.Text, "\nacl afe_why_"+r+" annotate_transaction afe_why="+r+"\n") {
			t.Errorf("no annotation of the reason %q", r)
		}
	}
}

// The frame the proxy checks: the header and the trailer of the ID, lines
// of printable ASCII, none empty, no tab (a request carries newlines as
// tabs), each within squid's line. The ID follows every part of the policy
// and stays put for the same one.
func TestRenderFramesTheText(t *testing.T) {
	base := Policy{Hosts: mustHosts(t, "example.com")}
	c, err := base.Render()
	if err != nil {
		t.Fatal(err)
	}
	checkFrame(t, c)
	again, _ := base.Render()
	if again != c {
		t.Fatal("the same policy renders differently")
	}
	ids := map[string]string{"base": c.ID}
	for name, p := range map[string]Policy{
		"another host":   {Hosts: mustHosts(t, "example.com", "other.org")},
		"its subdomains": {Hosts: mustHosts(t, ".example.com")},
		"private":        {Hosts: base.Hosts, AllowPrivate: true},
		"a denied range": {Hosts: base.Hosts, DenyIPs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
		"nothing":        {},
	} {
		c, err := p.Render()
		if err != nil {
			t.Fatal(err)
		}
		checkFrame(t, c)
		for other, id := range ids {
			if id == c.ID {
				t.Errorf("%s and %s have one ID", name, other)
			}
		}
		ids[name] = c.ID
	}
}

func checkFrame(t *testing.T, c Config) {
	t.Helper()
	if !strings.HasPrefix(c.Text, Header+c.ID+"\n") || !strings.HasSuffix(c.Text, "\n"+Trailer+c.ID+"\n") {
		t.Fatalf("not framed by its ID %s:\n%s", c.ID, c.Text)
	}
	for _, l := range strings.Split(strings.TrimSuffix(c.Text, "\n"), "\n") {
		if l == "" || len(l) > MaxLine || strings.ContainsFunc(l, func(r rune) bool { return r < ' ' || r > '~' }) {
			t.Fatalf("line %q: empty, too long, or not printable ASCII", l)
		}
	}
}

// The renderer refuses, on its own, every host that is not a valid name
// and every list admission would refuse: nothing a tenant writes reaches
// squid's configuration but a checked name.
func TestRenderRefusesHostileHosts(t *testing.T) {
	for name, h := range map[string]Host{
		"newline injection":   {Name: "allowed.test\nhttp_access allow all"},
		"carriage return":     {Name: "allowed.test\rhttp_access allow all"},
		"space":               {Name: "example.com all"},
		"tab":                 {Name: "allowed.test\tall"},
		"comment":             {Name: "allowed.test#x"},
		"double quote":        {Name: `allowed.test"`},
		"single quote":        {Name: "allowed.test'"},
		"squid's quoted file": {Name: `"/etc/passwd"`},
		"squid option":        {Name: "-n"},
		"include":             {Name: "include"},
		"squid macro":         {Name: "${process_number}.com"},
		"ipv4":                {Name: "10.0.0.1"},
		"ipv6":                {Name: "::1"},
		"port":                {Name: "example.com:443"},
		"scheme":              {Name: "http://example.com"},
		"path":                {Name: "example.com/x"},
		"wildcard":            {Name: "*.example.com"},
		"leading dot in name": {Name: ".example.com"},
		"trailing dot":        {Name: "example.com."},
		"empty label":         {Name: "example..com"},
		"one label":           {Name: "localhost"},
		"empty":               {},
		"upper case":          {Name: "Example.com"},
		"unicode look-alike":  {Name: "exаmple.com"},
		"nul":                 {Name: "a.com\x00b"},
		"label too long":      {Name: strings.Repeat("a", 64) + ".com"},
		"name too long":       {Name: strings.Repeat("abcdefghi.", 26) + "com"},
		"numeric tld":         {Name: "example.123"},
		"leading dash":        {Name: "-a.example.com"},
		"trailing dash":       {Name: "a-.example.com"},
		"too short":           {Name: "a.b"},
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := (Policy{Hosts: []Host{{Name: "ok.example.com"}, h}}).Render(); err == nil {
				t.Fatalf("rendered:\n%s", c.Text)
			}
		})
	}
	for name, p := range map[string]Policy{
		"listed twice":   {Hosts: []Host{{Name: "a.com"}, {Name: "a.com"}}},
		"too many":       {Hosts: slices.Repeat([]Host{{Name: "a.com"}}, MaxHosts+1)},
		"invalid prefix": {Hosts: []Host{{Name: "a.com"}}, DenyIPs: []netip.Prefix{{}}},
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := p.Render(); err == nil {
				t.Fatalf("rendered:\n%s", c.Text)
			}
		})
	}
	for name, list := range map[string][]string{
		"a name":     {"deadbeef"},
		"partial":    {"1.2.3"},
		"injected":   {"1.2.3.4\nhttp_access allow all"},
		"two words":  {"1.2.3.4 all"},
		"a zone":     {"fe80::1%eth0"},
		"empty":      {""},
		"a bad mask": {"10.0.0.0/33"},
	} {
		t.Run("denied "+name, func(t *testing.T) {
			if _, err := ParseDenied(list); err == nil {
				t.Fatalf("%q parsed", list)
			}
		})
	}
}

// The largest policy admission allows, 64 names of 253 characters, and
// a long list of the host's addresses (the manager's, not bounded by
// admission) render every entry, each line within squid's.
func TestRenderTheLargestPolicy(t *testing.T) {
	var p Policy
	for i := range MaxHosts {
		h, err := ParseHost(LongName(i, 253))
		if err != nil {
			t.Fatal(err)
		}
		p.Hosts = append(p.Hosts, h)
	}
	for i := range 512 {
		p.DenyIPs = append(p.DenyIPs, netip.MustParsePrefix(fmt.Sprintf("fd00:ffff:ffff:ffff:ffff:ffff:ffff:%04x/128", i)))
	}
	c, err := p.Render()
	if err != nil {
		t.Fatal(err)
	}
	checkFrame(t, c)
	if got := len(lines(c.Text, "acl afe_allowed ")); got != MaxHosts {
		t.Fatalf("%d names rendered", got)
	}
	if got := len(lines(c.Text, "acl afe_host ")); got != 512 {
		t.Fatalf("%d addresses rendered", got)
	}
}

// A request carries the whole text, newlines as tabs, with its length;
// only the proxy's answer with the request's nonce and the text's ID
// counts.
func TestRequest(t *testing.T) {
	c, err := Policy{Hosts: mustHosts(t, "example.com")}.Render()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("afe-egress-config n1 %d %s", len(c.Text), strings.ReplaceAll(c.Text, "\n", "\t"))
	if got := c.Request("n1"); got != want || strings.Contains(got, "\n") {
		t.Fatalf("request %q, want %q", got, want)
	}
	other, _ := Policy{}.Render()
	for line, want := range map[string][2]bool{
		"afe-egress-proxy: allowlist " + c.ID + " taken n1":     {true, true},
		"afe-egress-proxy: allowlist refused n1":                {true, false},
		"afe-egress-proxy: allowlist " + c.ID + " taken n2":     {false, false},
		"afe-egress-proxy: allowlist " + other.ID + " taken n1": {false, false},
		"afe-egress-proxy: allowlist refused n2":                {false, false},
		"x afe-egress-proxy: allowlist " + c.ID + " taken n1":   {false, false},
	} {
		if got := [2]bool{c.Answered("n1", line), c.Taken("n1", line)}; got != want {
			t.Errorf("%q: answered, taken %v, want %v", line, got, want)
		}
	}
	env := c.Env(Policy{Hosts: mustHosts(t, "example.com", ".pypi.org")})
	if d := cmp.Diff([]string{"AFE_EGRESS_HOSTS=example.com,.pypi.org", "AFE_EGRESS_CONFIG=" + c.Text}, env); d != "" {
		t.Fatal(d)
	}
}

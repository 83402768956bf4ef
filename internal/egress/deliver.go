package egress

import (
	"strconv"
	"strings"
)

// The proxy's environment at its creation.
const (
	// EnvConfig holds the rendered configuration (Config.Text) a new proxy
	// starts squid with.
	EnvConfig = "AFE_EGRESS_CONFIG"
	// EnvHosts holds the allowlist the proxy was created with, the CRD's
	// entries separated by commas: for operators reading `docker inspect`
	// (the product's contract names it). The proxy does not read it, and
	// an allowlist changed in place does not change it.
	EnvHosts = "AFE_EGRESS_HOSTS"
)

// Env is the environment of a proxy created admitting the policy rendered
// as c.
func (c Config) Env(p Policy) []string {
	return []string{EnvHosts + "=" + strings.Join(p.Entries(), ","), EnvConfig + "=" + c.Text}
}

// requestVerb starts the line of a request.
const requestVerb = "afe-egress-config"

// Request is the line that gives a running proxy the configuration in
// place, written to its stdin (docker.Engine.Tell), which only a client of
// the engine's API can write:
//
//	afe-egress-config NONCE LENGTH TEXT
//
// NONCE is the caller's, lower-case hex, fresh for each request, and ends
// the answer, so that no other line of the proxy's output (squid's, which
// a workload's requests may shape) can pass for it. LENGTH is the text's
// in bytes; TEXT is Config.Text with each newline written as a tab (Render
// writes no tab). The proxy takes the text only whole: of its length,
// framed by Header and Trailer of one ID. It writes it to a file of its
// own, renames that over ConfigPath (squid, reading the file of a change
// before, keeps reading a whole one) and has squid read it again;
// connections in flight go on.
func (c Config) Request(nonce string) string {
	return requestVerb + " " + nonce + " " + strconv.Itoa(len(c.Text)) + " " + strings.ReplaceAll(c.Text, "\n", "\t")
}

// Answered tells whether a line of the proxy's stderr answers the request
// of the nonce, and Taken whether it says the configuration was taken.
func (c Config) Answered(nonce, line string) bool {
	return c.Taken(nonce, line) || line == "afe-egress-proxy: allowlist refused "+nonce
}

// Taken tells whether the line is the proxy's answer that it runs c now,
// to the request of the nonce.
func (c Config) Taken(nonce, line string) bool {
	return line == "afe-egress-proxy: allowlist "+c.ID+" taken "+nonce
}

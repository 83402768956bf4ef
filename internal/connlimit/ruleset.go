package connlimit

import (
	"fmt"
	"strings"
)

// The sets of the instance's table.
const (
	// SetNetworks holds the subnets of the sandboxes' internal networks:
	// the sandbox's connections to its proxy (and any other flow it starts
	// there) are bounded by its address.
	SetNetworks = "nets"
	// SetProxies holds the proxies' addresses on the egress network: the
	// upstream connections a sandbox drives through its proxy are bounded
	// by the proxy's address.
	SetProxies = "proxies"
)

// Ruleset is the nft script that makes the table, or brings an existing
// one to these limits, keeping its elements. Its base chain sits on the
// prerouting hook after conntrack (-200) and before NAT (-100), where a
// dropped packet frees its unconfirmed entry: a refused connection takes
// nothing of the table. With br_netfilter the hook sees the frames bridged
// between a sandbox and its proxy as well as those routed out.
func Ruleset(table string, l Limits) string {
	t := "ip " + table
	lines := []string{
		"add table " + t,
		"add set " + t + " " + SetNetworks + " { type ipv4_addr; flags interval; }",
		"add set " + t + " " + SetProxies + " { type ipv4_addr; }",
		"add set " + t + " new_rate { type ipv4_addr; size 65536; flags dynamic,timeout; timeout 5m; }",
		"add set " + t + " held { type ipv4_addr; size 65536; flags dynamic; }",
		"add chain " + t + " prerouting { type filter hook prerouting priority -150; policy accept; }",
		"add chain " + t + " bound",
		"flush chain " + t + " prerouting",
		"flush chain " + t + " bound",
		"flush set " + t + " new_rate",
		"flush set " + t + " held",
		"add rule " + t + " prerouting ct state new ip saddr @" + SetNetworks + " jump bound",
		"add rule " + t + " prerouting ct state new ip saddr @" + SetProxies + " jump bound",
		fmt.Sprintf("add rule %s bound add @new_rate { ip saddr limit rate over %d/second burst %d packets } counter drop", t, l.Rate, l.Burst),
		fmt.Sprintf("add rule %s bound add @held { ip saddr ct count over %d } counter drop", t, l.Max),
	}
	return strings.Join(lines, "\n") + "\n"
}

// elements is the nft script that adds (op "add") or deletes ("delete")
// the elements of the set; empty when there are none.
func elements(op, table, set string, elems []string) string {
	if len(elems) == 0 {
		return ""
	}
	return fmt.Sprintf("%s element ip %s %s { %s }\n", op, table, set, strings.Join(elems, ", "))
}

// Command egressconfig prints the squid configuration the controller
// renders for an allowlist (internal/egress), for a proxy run by hand:
//
//	docker run -i -e AFE_EGRESS_CONFIG="$(go run ./hack/egressconfig -allow-private allowed.test)" ... afe/egress-proxy:dev
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"afe.dev/sandbox/internal/egress"
)

func main() {
	private := flag.Bool("allow-private", false, "let destinations in private, loopback and link-local ranges through")
	deny := flag.String("deny", "", "addresses or CIDRs always refused, separated by commas")
	flag.Usage = func() {
		_, _ = fmt.Fprintln(flag.CommandLine.Output(), "usage: egressconfig [-allow-private] [-deny LIST] HOST...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(flag.Args(), *private, *deny); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "egressconfig:", err)
		os.Exit(1)
	}
}

func run(entries []string, private bool, deny string) error {
	hosts, err := egress.ParseHosts(entries)
	if err != nil {
		return err
	}
	var list []string
	if deny != "" {
		list = strings.Split(deny, ",")
	}
	denied, err := egress.ParseDenied(list)
	if err != nil {
		return err
	}
	c, err := egress.Policy{Hosts: hosts, AllowPrivate: private, DenyIPs: denied}.Render()
	if err != nil {
		return err
	}
	_, err = fmt.Print(c.Text)
	return err
}

// Package connlimit bounds what one sandbox can take of the engine host's
// connection-tracking table. Each connection a sandbox opens to its proxy
// crosses the host's bridge (br_netfilter) and takes an entry in the host's
// conntrack table, as does each connection its proxy opens upstream; a full
// table makes the kernel drop every new connection on the host. The bound
// is an nftables table of the host, one per controller instance, in which
// each sandbox network's subnet and each proxy's address on the egress
// network is an element: a source address in them may open Rate new
// connections a second (Burst at once) and hold Max that are not closing.
// The rules live in the host's network namespace, which no sandbox or proxy
// reaches, and are evaluated on the bridge's forward path whatever the
// runtime (runc, runsc) made the frames.
package connlimit

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Limits are what one source address may take of the host's table.
type Limits struct {
	// Rate is the new connections a second; 0 turns the bound off.
	Rate int
	// Burst is the new connections taken at once above Rate.
	Burst int
	// Max is the connections held at once that are not closing (TCP's
	// TIME_WAIT and CLOSE are closing; UDP and ICMP flows count until they
	// expire).
	Max int
}

// Enabled is true when the bound is to be installed.
func (l Limits) Enabled() bool { return l.Rate > 0 }

// Validate refuses limits that cannot be installed.
func (l Limits) Validate() error {
	if !l.Enabled() {
		return nil
	}
	if l.Burst < 1 || l.Max < 1 {
		return errors.New("the connection burst and maximum must be at least 1 when the rate is set")
	}
	return nil
}

// Bound is the most entries one source address can hold in the host's
// table: the connections it opened within the longest time a closing
// connection stays (the host's TIME_WAIT timeout, longer than CLOSE's), at
// most Rate a second plus Burst, and the connections older than that, which
// are not closing and so at most Max.
func (l Limits) Bound(timeWait time.Duration) int {
	return l.Rate*int(timeWait/time.Second) + l.Burst + l.Max
}

// instanceName is what an instance may be to name a table.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$`)

// Table is the name of the nftables table of the controller instance
// (table ip afe-<instance>): the rules of another instance are never
// touched.
func Table(instance string) (string, error) {
	if !instanceName.MatchString(instance) {
		return "", fmt.Errorf("instance %q cannot name an nftables table (letters, digits, '_', '.', '-')", instance)
	}
	return "afe-" + instance, nil
}

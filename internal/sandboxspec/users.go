package sandboxspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runexec"
)

// maxID is the largest uid or gid ParseUser accepts.
const maxID = 1<<31 - 2

// IDRange is an inclusive range of uids or gids.
type IDRange struct {
	Min, Max int
}

// IDRanges is a list of ranges of ids; an empty list allows every id.
type IDRanges []IDRange

// ParseIDRanges parses a comma-separated list of ids and inclusive ranges,
// such as "1000-65535,70000". Spaces around entries are ignored; an empty
// string is an empty list.
func ParseIDRanges(s string) (IDRanges, error) {
	var out IDRanges
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := parseID(lo)
		last, err2 := parseID(hi)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not an id or a range of ids such as 1000-65535 (ids are 1 to %d)", f, maxID)
		}
		if first > last {
			return nil, fmt.Errorf("range %q is empty: its start is above its end", f)
		}
		out = append(out, IDRange{Min: first, Max: last})
	}
	return out, nil
}

func parseID(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || len(s) > 10 {
		return 0, fmt.Errorf("not an id: %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxID {
		return 0, fmt.Errorf("not an id: %q", s)
	}
	return n, nil
}

// Allows is true when id lies in one of the ranges, or there are none.
func (r IDRanges) Allows(id int) bool {
	if len(r) == 0 {
		return true
	}
	return slices.ContainsFunc(r, func(x IDRange) bool { return x.Min <= id && id <= x.Max })
}

// String is the list as the flags spell it.
func (r IDRanges) String() string {
	parts := make([]string, len(r))
	for i, x := range r {
		parts[i] = strconv.Itoa(x.Min)
		if x.Max != x.Min {
			parts[i] += "-" + strconv.Itoa(x.Max)
		}
	}
	return strings.Join(parts, ",")
}

// ValidateUser checks a sandbox's user against the controller's policy and
// returns its uid and gid. Besides what ParseUser refuses, it refuses a gid
// the controller reserves (runexec.GIDMin and above: Runs and checks), a gid on the
// deny list, a uid or gid of the range the controller allocates from, and a
// uid or gid outside the allowed ranges. The gid is the only
// group the sandbox's processes get: the controller always gives the engine
// uid:gid, so the image's /etc/group adds no supplementary group.
func ValidateUser(user string, opts Options) (uid, gid int, err error) {
	uid, gid, err = ParseUser(user)
	if err != nil {
		return 0, 0, invalid(afev1.InvalidSpecReason, "%v", err)
	}
	switch {
	case gid >= runexec.GIDMin:
		// The Run groups, and above them the groups of the checks of
		// builtin Runs (builtin.CheckGID): no workload may hold one.
		return 0, 0, invalid(afev1.UserNotAllowedReason,
			"User %q: gid %d is %d or above, the groups the controller reserves for the processes of Runs; choose another gid",
			user, gid, runexec.GIDMin)
	case slices.Contains(opts.DenyGIDs, gid):
		return 0, 0, invalid(afev1.UserNotAllowedReason,
			"User %q: gid %d is on the controller's deny list (--deny-gids: the group of the engine's socket and the host's privileged groups); choose another gid",
			user, gid)
	case opts.sandboxIDs().Contains(uid) || opts.sandboxIDs().Contains(gid):
		// Allocated ids are each one sandbox's own.
		return 0, 0, invalid(afev1.UserNotAllowedReason,
			"User %q: ids %s are reserved for sandboxes without a user (--sandbox-id-range); choose another user, or leave it unset to get an id of your own",
			user, opts.sandboxIDs())
	case !opts.AllowedUIDs.Allows(uid):
		return 0, 0, invalid(afev1.UserNotAllowedReason,
			"User %q: uid %d is outside the controller's --allowed-uids (%s)", user, uid, opts.AllowedUIDs)
	case !opts.AllowedGIDs.Allows(gid):
		return 0, 0, invalid(afev1.UserNotAllowedReason,
			"User %q: gid %d is outside the controller's --allowed-gids (%s)", user, gid, opts.AllowedGIDs)
	}
	return uid, gid, nil
}

package sandboxspec

import (
	"fmt"
	"hash/fnv"
	"slices"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/runexec"
)

// DefaultSandboxIDs is the default of --sandbox-id-range: the host ids a
// sandbox without spec.user gets one of. It lies above the ranges that
// useradd hands out as subordinate ids (100000 to 600100000) and that
// systemd gives containers (524288 to 1879048191), and below the groups
// of Runs (runexec.GIDMin), so that no host user, rootless container or
// Run group shares an id with a sandbox.
var DefaultSandboxIDs = IDRange{Min: 1_900_000_000, Max: 1_900_065_535}

// ParseIDRange parses --sandbox-id-range: one inclusive range "min-max".
func ParseIDRange(s string) (IDRange, error) {
	rs, err := ParseIDRanges(s)
	if err != nil {
		return IDRange{}, err
	}
	if len(rs) != 1 || rs[0].Min == rs[0].Max {
		return IDRange{}, fmt.Errorf("%q is not one range of ids such as %d-%d", s, DefaultSandboxIDs.Min, DefaultSandboxIDs.Max)
	}
	return rs[0], nil
}

// String is the range as the flag spells it.
func (r IDRange) String() string { return IDRanges{r}.String() }

// Contains is true when id lies in the range.
func (r IDRange) Contains(id int) bool { return r.Min <= id && id <= r.Max }

// sandboxIDs is the range ids are allocated from.
func (o Options) sandboxIDs() IDRange {
	if o.SandboxIDs == (IDRange{}) {
		return DefaultSandboxIDs
	}
	return o.SandboxIDs
}

// CheckSandboxIDs checks, when the manager starts, that every id of the
// range passes the user policy as uid and as gid: inside --allowed-uids and
// --allowed-gids, below the Run groups. Denied gids (which can be learnt
// later, as the engine socket's group) are skipped when allocating.
func CheckSandboxIDs(opts Options) error {
	r := opts.sandboxIDs()
	switch {
	case r.Min < 1 || r.Max >= runexec.GIDMin:
		return fmt.Errorf("--sandbox-id-range %s: ids must be between 1 and %d (the Run groups start at %d)", r, runexec.GIDMin-1, runexec.GIDMin)
	case !opts.AllowedUIDs.Covers(r):
		return fmt.Errorf("--sandbox-id-range %s is not inside --allowed-uids (%s): a sandbox without spec.user would be refused", r, opts.AllowedUIDs)
	case !opts.AllowedGIDs.Covers(r):
		return fmt.Errorf("--sandbox-id-range %s is not inside --allowed-gids (%s): a sandbox without spec.user would be refused", r, opts.AllowedGIDs)
	}
	return nil
}

// Covers is true when every id of r is allowed.
func (rs IDRanges) Covers(r IDRange) bool {
	if len(rs) == 0 {
		return true
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b IDRange) int { return a.Min - b.Min })
	next := r.Min // the first id not yet known to be allowed
	for _, x := range sorted {
		if x.Min > next {
			break
		}
		if x.Max >= next {
			next = x.Max + 1
		}
		if next > r.Max {
			return true
		}
	}
	return false
}

// ValidateAllocated checks an allocated user, as its container's
// afe.uid label and user record it ("uid:gid"): uid and gid are one id of
// the range, allowed by the policy. It returns that id.
func ValidateAllocated(user string, opts Options) (int, error) {
	uid, gid, err := ParseUser(user)
	if err != nil {
		return 0, err
	}
	if uid != gid || formatUser(uid, gid) != user || !opts.sandboxIDs().Contains(uid) {
		return 0, fmt.Errorf("user %q is not an id of --sandbox-id-range %s", user, opts.sandboxIDs())
	}
	if !allocatable(uid, opts) {
		return 0, fmt.Errorf("user %q is refused by the controller's policy", user)
	}
	return uid, nil
}

// allocatable is true when the id, as uid and gid, passes the policy.
func allocatable(id int, opts Options) bool {
	return id < runexec.GIDMin && !slices.Contains(opts.DenyGIDs, id) &&
		opts.AllowedUIDs.Allows(id) && opts.AllowedGIDs.Allows(id)
}

// AllocatedUser is the user string of an allocated id.
func AllocatedUser(id int) string { return formatUser(id, id) }

// AllocateID picks the id of a sandbox (by its Kubernetes UID) that has
// none: the first id, from a place in the range that the UID decides and
// wrapping around, that is not taken and passes the policy. Starting where
// the UID decides makes a sandbox whose containers are all gone (a
// recreation after a loss, a controller that stopped in the middle of one)
// find the same id again, unless another sandbox took it meanwhile. It
// fails with the reason SandboxIDsExhausted when there is none.
func AllocateID(sandboxUID string, taken map[int]bool, opts Options) (int, error) {
	r := opts.sandboxIDs()
	size := uint64(r.Max-r.Min) + 1
	h := fnv.New64a()
	_, _ = h.Write([]byte(sandboxUID))
	start := h.Sum64() % size
	for i := uint64(0); i < size; i++ {
		id := r.Min + int((start+i)%size)
		if !taken[id] && allocatable(id, opts) {
			return id, nil
		}
	}
	return 0, invalid(afev1.SandboxIDsExhaustedReason,
		"Every id of the controller's --sandbox-id-range %s is held by another sandbox on the engine; set spec.user, or widen the range", r)
}

// ContainerUser is the uid and gid the sandbox's container runs as, as the
// controller made it: spec.user when it is set, and otherwise the id
// allocated to the sandbox, which the container's afe.uid label records; a
// container without the label, or whose user is not the label's, is
// refused. c must be the sandbox's container, its labels verified.
func ContainerUser(specUser string, c *enginespec.Container) (uid, gid int, err error) {
	if specUser != "" {
		return ParseUser(specUser)
	}
	label := c.Labels[afev1.LabelUser]
	if label == "" || label != c.User {
		return 0, 0, fmt.Errorf("container %s of a sandbox without spec.user carries no allocated user (label %s %q, user %q)", c.Name, afev1.LabelUser, label, c.User)
	}
	if uid, gid, err = ParseUser(label); err == nil && uid != gid {
		err = fmt.Errorf("container %s: allocated user %q is not one id", c.Name, label)
	}
	return uid, gid, err
}

// ValidateContainerUser is ContainerUser checked against the policy: an
// explicit user as ValidateUser checks it, an allocated one as
// ValidateAllocated does.
func ValidateContainerUser(specUser string, c *enginespec.Container, opts Options) (uid, gid int, err error) {
	if specUser != "" {
		return ValidateUser(specUser, opts)
	}
	if uid, gid, err = ContainerUser(specUser, c); err != nil {
		return 0, 0, invalid(afev1.UserNotAllowedReason, "%v", err)
	}
	if _, err := ValidateAllocated(c.User, opts); err != nil {
		return 0, 0, invalid(afev1.UserNotAllowedReason, "%v", err)
	}
	return uid, gid, nil
}

package pool

import (
	"fmt"
	"slices"
	"strings"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Result is how a sandbox was served: the values of
// afe_pool_claims_total{result}, and Cold for a sandbox no pool concerns.
type Result string

const (
	// Warm means a member of a pool serves the sandbox.
	Warm Result = "warm"
	// ColdEmpty means the pool that would serve the sandbox had no ready member.
	ColdEmpty Result = "cold_empty"
	// ColdMismatch means the sandbox named a pool that cannot serve it: missing,
	// being deleted, of another shape, or a workspace never pooled.
	ColdMismatch Result = "cold_mismatch"
	// Cold means no pool concerns the sandbox (it names none, and none of its
	// namespace has its shape); nothing is counted and no Event recorded.
	Cold Result = "cold"
)

// Pool is what Choose needs of a SandboxPool of the sandbox's namespace.
type Pool struct {
	Name    string
	UID     string
	Created time.Time
	// Deleting is true once the pool has a deletion timestamp: it gives no
	// member any more.
	Deleting bool
	// Shape is the shape of the pool's template (ShapeOf, with the
	// template's env resolved as for a sandbox of the namespace).
	Shape Shape
}

// Member is a pool member's container as the engine lists it.
type Member struct {
	enginespec.Container
	// Created is when the engine created it.
	Created time.Time
}

// Request is the sandbox a choice is made for.
type Request struct {
	// ID is the sandbox's identity (its namespace and controller instance
	// count here).
	ID sandboxspec.Identity
	// Spec is the sandbox's template (its poolRef and workspace count).
	Spec *afev1.SandboxTemplateSpec
	// Shape is the shape of that template (ShapeOf).
	Shape Shape
	// Claiming holds the IDs of members that claim records of other
	// Sandboxes name (claims in flight): they are not offered.
	Claiming map[string]bool
}

// Choice is the pool and member that serve a sandbox, or why none does.
type Choice struct {
	Result Result
	// Pool is the pool concerned: the one chosen, or the one named or of
	// the sandbox's shape that could not serve it; empty for Cold.
	Pool    string
	PoolUID string
	// Member is the member chosen; nil unless Warm.
	Member *Member
	// Reason says in words why the sandbox is cold, for the Event of a
	// sandbox that named a pool; empty when Warm.
	Reason string
}

// Choose picks the pool and member that serve a sandbox from the pools of
// its namespace and the members the engine lists. With spec.poolRef only
// that pool may serve it; without, the pools whose shape equals the
// sandbox's do, the oldest ready member of any of them first. A Folder
// workspace or a workspace from a snapshot is never served warm.
//
// A member is a candidate only when its labels name the sandbox's
// namespace, this controller instance, the pool's name and UID and the
// member role and no Sandbox, it carries the pool's current shape hash
// (and an allocated user when the shape names none), it runs, it still
// bears its pool name (a claimed member bears its Sandbox's), and no other
// claim in flight names it.
func Choose(req Request, pools []Pool, members []Member) Choice {
	never := neverPooled(req.Spec)
	if req.Spec.PoolRef == nil {
		if never != "" {
			return Choice{Result: Cold}
		}
		return chooseByShape(req, pools, members)
	}
	name := req.Spec.PoolRef.Name
	if never != "" {
		return Choice{Result: ColdMismatch, Pool: name, Reason: never}
	}
	i := slices.IndexFunc(pools, func(p Pool) bool { return p.Name == name })
	if i < 0 {
		return Choice{Result: ColdMismatch, Pool: name, Reason: fmt.Sprintf("pool %s does not exist", name)}
	}
	p := pools[i]
	if p.Deleting {
		return Choice{Result: ColdMismatch, Pool: name, PoolUID: p.UID, Reason: fmt.Sprintf("pool %s is being deleted", name)}
	}
	if d := p.Shape.Differs(req.Shape); d != "" {
		return Choice{Result: ColdMismatch, Pool: name, PoolUID: p.UID,
			Reason: fmt.Sprintf("pool %s's template shapes another container: %s", name, d)}
	}
	return oldest(req, []Pool{p}, members)
}

// chooseByShape serves a sandbox that names no pool from the pools of its
// shape.
func chooseByShape(req Request, pools []Pool, members []Member) Choice {
	var same []Pool
	for _, p := range pools {
		if !p.Deleting && p.Shape == req.Shape {
			same = append(same, p)
		}
	}
	if len(same) == 0 {
		return Choice{Result: Cold}
	}
	// The oldest pool first, so that a sandbox nobody serves is counted
	// against one pool, always the same.
	slices.SortFunc(same, func(a, b Pool) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return oldest(req, same, members)
}

// oldest is the oldest candidate member of the pools (ties: by ID), or
// ColdEmpty against the first pool.
func oldest(req Request, pools []Pool, members []Member) Choice {
	var best *Member
	var bestPool Pool
	for _, p := range pools {
		for i := range members {
			m := &members[i]
			if !Candidate(req, p, m) {
				continue
			}
			if best == nil || m.Created.Before(best.Created) || (m.Created.Equal(best.Created) && m.ID < best.ID) {
				best, bestPool = m, p
			}
		}
	}
	if best == nil {
		p := pools[0]
		return Choice{Result: ColdEmpty, Pool: p.Name, PoolUID: p.UID, Reason: fmt.Sprintf("pool %s has no ready member", p.Name)}
	}
	return Choice{Result: Warm, Pool: bestPool.Name, PoolUID: bestPool.UID, Member: best}
}

// Candidate tells whether a member may serve the request from pool p.
func Candidate(req Request, p Pool, m *Member) bool {
	l := m.Labels
	if l[afev1.LabelNamespace] != req.ID.Namespace || l[afev1.LabelController] != req.ID.Instance ||
		l[afev1.LabelPool] != p.Name || l[afev1.LabelPoolUID] != p.UID ||
		l[afev1.LabelRole] != afev1.RoleMember || l[afev1.LabelSandboxUID] != "" {
		return false
	}
	if l[afev1.LabelSpecHash] != p.Shape.Hash() || (p.Shape.User == "" && l[afev1.LabelUser] == "") {
		return false
	}
	if _, unclaimed := naming.MemberID(naming.Key(req.ID.Namespace, p.Name), m.Name); !unclaimed {
		return false
	}
	return m.Running && !req.Claiming[m.ID]
}

// neverPooled says why a sandbox's workspace is never served warm; empty
// when it may be.
func neverPooled(spec *afev1.SandboxTemplateSpec) string {
	switch {
	case spec.Workspace.Type == afev1.WorkspaceFolder:
		return "a Folder workspace is never pooled"
	case spec.Workspace.FromSnapshot != "":
		return "a workspace from a snapshot is never pooled"
	}
	return ""
}

package pool

import "time"

// Refill pacing. A member's creation costs the engine what a cold
// sandbox's does (about 0.4 s of a 2-core engine, most of it in the
// daemon), and a cold creation is a user waiting while a member is only
// capacity for later. So members are made at most two at a time per pool
// and on the engine (two cores: a third creation only queues behind the
// others), and only one while any cold creation is in flight, so that a
// cold creation shares the engine with at most one member's; starts are
// spaced (50 ms, 250 ms while cold creations are in flight) so that a
// cold creation arriving during a refill finds a gap. No member is started
// while a claim is in flight (a user waiting on a warm sandbox, whose
// claim binds its name, record, proxy and status in tens of
// milliseconds): the claim's end has its pool looked at again, and the
// others look again after ClaimRecheck.
const (
	// MaxCreating is how many members are made at once, per pool and on
	// the engine.
	MaxCreating = 2
	// MaxCreatingBesideCold is the same while cold creations are in flight.
	MaxCreatingBesideCold = 1
	// Spacing is the least time between two member creations of a pool.
	Spacing = 50 * time.Millisecond
	// SpacingBesideCold is the same while cold creations are in flight.
	SpacingBesideCold = 250 * time.Millisecond
	// BusyRecheck is when to look again when creations in flight hold the
	// refill back: their end usually wakes the pool first.
	BusyRecheck = time.Second
	// ClaimRecheck is when to look again when claims in flight hold the
	// refill back.
	ClaimRecheck = 100 * time.Millisecond
)

// RefillState is what Refill decides from.
type RefillState struct {
	// Replicas is the pool's spec.replicas.
	Replicas int32
	// MaxReplicas is the controller's --max-pool-replicas.
	MaxReplicas int
	// Ready and Creating are the pool's ready members and those being made.
	Ready, Creating int
	// EngineCreating is the members being made on the engine, every pool's.
	EngineCreating int
	// ColdInFlight is the cold sandbox creations in flight on the engine.
	ColdInFlight int
	// ClaimsInFlight is the claims of warm members in flight, every
	// pool's.
	ClaimsInFlight int
	// LastCreation is when the pool last started making a member.
	LastCreation time.Time
	// Now is now.
	Now time.Time
}

// RefillPlan is how many members to start now, how many ready ones are
// too many (a lowered replicas), and when to look again (zero: when
// something changes).
type RefillPlan struct {
	Start   int
	Surplus int
	After   time.Duration
}

// Refill paces a pool's refill: the members to start now so that the pool
// comes back to its replicas (bounded by --max-pool-replicas) without
// starving cold creations.
func Refill(s RefillState) RefillPlan {
	want := max(0, min(int(s.Replicas), s.MaxReplicas))
	have := s.Ready + s.Creating
	if have >= want {
		return RefillPlan{Surplus: max(0, s.Ready-want)}
	}
	if s.ClaimsInFlight > 0 {
		return RefillPlan{After: ClaimRecheck}
	}
	limit, spacing := MaxCreating, Spacing
	if s.ColdInFlight > 0 {
		limit, spacing = MaxCreatingBesideCold, SpacingBesideCold
	}
	room := min(limit-s.Creating, limit-s.EngineCreating)
	if room <= 0 {
		return RefillPlan{After: BusyRecheck}
	}
	if wait := s.LastCreation.Add(spacing).Sub(s.Now); !s.LastCreation.IsZero() && wait > 0 {
		return RefillPlan{After: wait}
	}
	// One start per spacing: the next one after it, unless the deficit is
	// met.
	plan := RefillPlan{Start: 1}
	if want-have > 1 {
		plan.After = spacing
	}
	return plan
}

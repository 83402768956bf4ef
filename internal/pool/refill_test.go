package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRefill(t *testing.T) {
	now := t0.Add(time.Hour)
	long := now.Add(-time.Minute)
	tests := map[string]struct {
		state RefillState
		want  RefillPlan
	}{
		"full":                                   {RefillState{Replicas: 3, MaxReplicas: 50, Ready: 3, LastCreation: long}, RefillPlan{}},
		"full, some being made":                  {RefillState{Replicas: 3, MaxReplicas: 50, Ready: 2, Creating: 1, EngineCreating: 1}, RefillPlan{}},
		"replicas lowered":                       {RefillState{Replicas: 1, MaxReplicas: 50, Ready: 3}, RefillPlan{Surplus: 2}},
		"bounded by --max-pool-replicas":         {RefillState{Replicas: 80, MaxReplicas: 5, Ready: 7}, RefillPlan{Surplus: 2}},
		"--max-pool-replicas 0 keeps none":       {RefillState{Replicas: 3, MaxReplicas: 0, Ready: 1}, RefillPlan{Surplus: 1}},
		"replicas 0":                             {RefillState{Replicas: 0, MaxReplicas: 50}, RefillPlan{}},
		"one missing, first ever":                {RefillState{Replicas: 1, MaxReplicas: 50}, RefillPlan{Start: 1}},
		"empty, first ever: one now, next after": {RefillState{Replicas: 20, MaxReplicas: 50}, RefillPlan{Start: 1, After: Spacing}},
		"empty, long after the last":             {RefillState{Replicas: 20, MaxReplicas: 50, LastCreation: long, Now: now}, RefillPlan{Start: 1, After: Spacing}},
		"spacing not over":                       {RefillState{Replicas: 20, MaxReplicas: 50, Creating: 1, EngineCreating: 1, LastCreation: now.Add(-20 * time.Millisecond), Now: now}, RefillPlan{After: 30 * time.Millisecond}},
		"spacing over, one in flight":            {RefillState{Replicas: 20, MaxReplicas: 50, Creating: 1, EngineCreating: 1, LastCreation: now.Add(-Spacing), Now: now}, RefillPlan{Start: 1, After: Spacing}},
		"two in flight in the pool":              {RefillState{Replicas: 20, MaxReplicas: 50, Creating: 2, EngineCreating: 2, LastCreation: long, Now: now}, RefillPlan{After: BusyRecheck}},
		"two in flight on the engine":            {RefillState{Replicas: 20, MaxReplicas: 50, EngineCreating: 2, LastCreation: long, Now: now}, RefillPlan{After: BusyRecheck}},
		"cold in flight, none being made":        {RefillState{Replicas: 20, MaxReplicas: 50, ColdInFlight: 3, LastCreation: long, Now: now}, RefillPlan{Start: 1, After: SpacingBesideCold}},
		"cold in flight, one being made":         {RefillState{Replicas: 20, MaxReplicas: 50, Creating: 1, EngineCreating: 1, ColdInFlight: 1, LastCreation: long, Now: now}, RefillPlan{After: BusyRecheck}},
		"cold in flight, another pool's member":  {RefillState{Replicas: 20, MaxReplicas: 50, EngineCreating: 1, ColdInFlight: 1, LastCreation: long, Now: now}, RefillPlan{After: BusyRecheck}},
		"cold in flight, wider spacing":          {RefillState{Replicas: 20, MaxReplicas: 50, ColdInFlight: 1, LastCreation: now.Add(-100 * time.Millisecond), Now: now}, RefillPlan{After: 150 * time.Millisecond}},
		"last one missing: no next look":         {RefillState{Replicas: 2, MaxReplicas: 50, Ready: 1, LastCreation: long, Now: now}, RefillPlan{Start: 1}},
		"a claim in flight holds the refill":     {RefillState{Replicas: 20, MaxReplicas: 50, Ready: 3, ClaimsInFlight: 1, LastCreation: long, Now: now}, RefillPlan{After: ClaimRecheck}},
		"a claim in flight, the pool full":       {RefillState{Replicas: 3, MaxReplicas: 50, Ready: 3, ClaimsInFlight: 2, LastCreation: long, Now: now}, RefillPlan{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Refill(tc.state)); diff != "" {
				t.Fatalf("Refill (-want +got):\n%s", diff)
			}
		})
	}
}

// Driven step by step, a refill of 20 with cold creations always in
// flight never has more than one member in the making, and one without
// them never more than two; both end full.
func TestRefillBounds(t *testing.T) {
	const took = 400 * time.Millisecond // one member's creation
	for _, cold := range []int{0, 1} {
		s := RefillState{Replicas: 20, MaxReplicas: 50, ColdInFlight: cold, Now: t0}
		var done []time.Time // when each member in the making is ready
		limit := MaxCreating
		if cold > 0 {
			limit = MaxCreatingBesideCold
		}
		for i := 0; s.Ready < 20 && i < 10000; i++ {
			kept := done[:0]
			for _, d := range done {
				if d.After(s.Now) {
					kept = append(kept, d)
				} else {
					s.Ready++
				}
			}
			done = kept
			s.Creating, s.EngineCreating = len(done), len(done)
			p := Refill(s)
			for range p.Start {
				done = append(done, s.Now.Add(took))
				s.LastCreation = s.Now
			}
			if len(done) > limit {
				t.Fatalf("cold %d: %d members in the making", cold, len(done))
			}
			s.Now = s.Now.Add(10 * time.Millisecond)
		}
		if s.Ready != 20 {
			t.Fatalf("cold %d: %d ready", cold, s.Ready)
		}
	}
}

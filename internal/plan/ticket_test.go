package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestTicket(t *testing.T) {
	tests := map[string]struct {
		deleting bool
		state    afev1.TicketState
		expired  bool
		want     TicketStep
	}{
		"active":                {state: afev1.TicketActive, want: TicketProvision},
		"unset is active":       {want: TicketProvision},
		"paused":                {state: afev1.TicketPaused, want: TicketKeep},
		"done":                  {state: afev1.TicketDone, want: TicketCleanUp},
		"failed":                {state: afev1.TicketFailed, want: TicketCleanUp},
		"cancelled":             {state: afev1.TicketCancelled, want: TicketCleanUp},
		"deleted active":        {deleting: true, state: afev1.TicketActive, want: TicketDelete},
		"deleted paused":        {deleting: true, state: afev1.TicketPaused, want: TicketDelete},
		"deleted after done":    {deleting: true, state: afev1.TicketDone, want: TicketDelete},
		"active past deadline":  {state: afev1.TicketActive, expired: true, want: TicketCleanUp},
		"paused past deadline":  {state: afev1.TicketPaused, expired: true, want: TicketCleanUp},
		"deleted past deadline": {deleting: true, state: afev1.TicketActive, expired: true, want: TicketDelete},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Ticket(tc.deleting, tc.state, tc.expired)); diff != "" {
				t.Errorf("Ticket() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

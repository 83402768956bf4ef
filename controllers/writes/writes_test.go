package writes

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestFinishedTTL(t *testing.T) {
	tests := map[string]struct {
		own    *int32
		def    time.Duration
		want   time.Duration
		wantOK bool
	}{
		"kept":                  {},
		"the manager's default": {def: time.Hour, want: time.Hour, wantOK: true},
		"its own":               {own: ptr.To(int32(30)), def: time.Hour, want: 30 * time.Second, wantOK: true},
		"its own zero: at once": {own: ptr.To(int32(0)), def: time.Hour, want: 0, wantOK: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := FinishedTTL(tc.own, tc.def)
			if diff := cmp.Diff([]any{tc.want, tc.wantOK}, []any{got, ok}); diff != "" {
				t.Errorf("FinishedTTL() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequeueSooner(t *testing.T) {
	tests := map[string]struct {
		res   ctrl.Result
		after time.Duration
		want  time.Duration
	}{
		"none yet":     {after: time.Second, want: time.Second},
		"a later one":  {res: ctrl.Result{RequeueAfter: time.Minute}, after: time.Second, want: time.Second},
		"a sooner one": {res: ctrl.Result{RequeueAfter: time.Millisecond}, after: time.Second, want: time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RequeueSooner(tc.res, tc.after).RequeueAfter; got != tc.want {
				t.Errorf("RequeueSooner() = %v, want %v", got, tc.want)
			}
		})
	}
}

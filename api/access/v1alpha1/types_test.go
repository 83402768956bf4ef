package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReasonOf(t *testing.T) {
	tests := map[string]struct {
		st   *metav1.Status
		want Reason
	}{
		"nil":           {nil, ""},
		"no details":    {&metav1.Status{Reason: metav1.StatusReasonNotFound}, ""},
		"another group": {&metav1.Status{Details: &metav1.StatusDetails{Group: "apps", Causes: []metav1.StatusCause{{Type: "X"}}}}, ""},
		"ours":          {&metav1.Status{Details: Details(ReasonLogNotFound, ResourceRuns, "r")}, ReasonLogNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ReasonOf(tc.st); got != tc.want {
				t.Errorf("ReasonOf = %q, want %q", got, tc.want)
			}
		})
	}
}

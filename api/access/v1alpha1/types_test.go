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
		"client-go's, of an answer that was no Status (the API server's 503)": {&metav1.Status{Details: &metav1.StatusDetails{
			Group: GroupName, Kind: ResourceSandboxes, Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "error trying to reach service"}}}}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ReasonOf(tc.st); got != tc.want {
				t.Errorf("ReasonOf = %q, want %q", got, tc.want)
			}
		})
	}
}

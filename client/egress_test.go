package client

import (
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The client refuses, before any request, an egress entry the proxy's
// renderer refuses (internal/egress).
func TestCheckEgress(t *testing.T) {
	if err := checkEgress([]afev1.EgressHost{"example.com", ".pypi.org"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []afev1.EgressHost{"a.com\nhttp_access allow all", "10.0.0.1", "*.a.com", "a.com:443"} {
		if err := checkEgress([]afev1.EgressHost{"example.com", bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

package access

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// TestExitStatusIsAlwaysReadable reads each status as client-go's protocol
// v4 decoder does: an exit code cause must parse as one byte.
func TestExitStatusIsAlwaysReadable(t *testing.T) {
	for code, want := range map[int]string{
		0:          "success",
		1:          "exit 1",
		7:          "exit 7",
		255:        "exit 255",
		256:        "error",
		-1:         "error",
		4294967295: "error",
	} {
		st := exitStatus(code, nil)
		got := ""
		switch {
		case st.Status == metav1.StatusSuccess:
			got = "success"
		case st.Reason == remotecommand.NonZeroExitCodeReason:
			for _, c := range st.Details.Causes {
				if c.Type != remotecommand.ExitCodeCauseType {
					continue
				}
				rc, err := strconv.ParseUint(c.Message, 10, 8)
				if err != nil {
					t.Fatalf("code %d: invalid exit code value %q", code, c.Message)
				}
				got = "exit " + strconv.FormatUint(rc, 10)
			}
		case st.Status == metav1.StatusFailure && st.Message != "":
			got = "error"
		}
		if got != want {
			t.Errorf("code %d: %s (%+v), want %s", code, got, st, want)
		}
	}
}

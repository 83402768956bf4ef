package identity

import (
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
)

func TestStatusNamesForeign(t *testing.T) {
	key := naming.Key("ns", "sbx")
	member := naming.Member(naming.Key("ns", "warm"), "0123456789")
	elsewhere := naming.Member(naming.Key("other", "warm"), "0123456789")
	tests := map[string]struct {
		status afev1.SandboxStatus
		want   bool
	}{
		"nothing named":                  {afev1.SandboxStatus{}, false},
		"its own names":                  {afev1.SandboxStatus{ContainerName: naming.Container(key), VolumeName: naming.Volume(key)}, false},
		"another sandbox's volume":       {afev1.SandboxStatus{VolumeName: naming.Volume(naming.Key("ns", "else"))}, true},
		"its pool's member's volume":     {afev1.SandboxStatus{Pool: "warm", VolumeName: naming.MemberVolume(member)}, false},
		"a member's volume, no pool":     {afev1.SandboxStatus{VolumeName: naming.MemberVolume(member)}, true},
		"another pool's member's volume": {afev1.SandboxStatus{Pool: "cold", VolumeName: naming.MemberVolume(member)}, true},
		"another namespace's member":     {afev1.SandboxStatus{Pool: "warm", VolumeName: naming.MemberVolume(elsewhere)}, true},
		"a member's container name":      {afev1.SandboxStatus{Pool: "warm", ContainerName: member}, true},
	}
	for name, tt := range tests {
		sbx := &afev1.Sandbox{Status: tt.status}
		sbx.Namespace, sbx.Name = "ns", "sbx"
		if got := StatusNamesForeign(sbx); got != tt.want {
			t.Errorf("%s: StatusNamesForeign = %v, want %v", name, got, tt.want)
		}
	}
}

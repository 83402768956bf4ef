package sandbox

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A claimed member removed whole is a loss of the sandbox that ran on it,
// as one that exited is; a member gone before the claim completed is not.
func TestClaimedGone(t *testing.T) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "uid-a"}}
	id := sandboxspec.IdentityOf(sbx, "default")
	record := pool.RecordLabels(id, pool.Choice{Pool: "agents", PoolUID: "pool-uid",
		Member: &pool.Member{Container: enginespec.Container{ID: "member-id", Name: "afe-team.agents_member-0123456789ab"}}})
	other := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b", UID: "uid-b"}}
	drop := pool.ClaimStep{Action: pool.ClaimDropRecord}
	tests := map[string]struct {
		containerID string
		id          sandboxspec.Identity
		member      *enginespec.Container
		step        pool.ClaimStep
		want        bool
	}{
		"ran on it, removed whole":        {containerID: "member-id", id: id, step: drop, want: true},
		"gone before the claim completed": {id: id, step: drop},
		"ran on another container":        {containerID: "other-id", id: id, step: drop},
		"another Sandbox's record":        {containerID: "member-id", id: sandboxspec.IdentityOf(other, "default"), step: drop},
		"the member still there":          {containerID: "member-id", id: id, member: &enginespec.Container{ID: "member-id"}, step: drop},
		"another step":                    {containerID: "member-id", id: id, step: pool.ClaimStep{Action: pool.ClaimRename}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &sandboxScope{sbx: sbx.DeepCopy(), id: tc.id}
			s.sbx.Status.ContainerID = tc.containerID
			v := pool.ClaimView{Sandbox: tc.id, Record: record, Member: tc.member}
			if got := claimedGone(s, v, tc.step); got != tc.want {
				t.Errorf("claimedGone = %v, want %v", got, tc.want)
			}
		})
	}
}

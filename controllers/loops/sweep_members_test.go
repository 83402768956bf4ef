package loops

import (
	"context"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/fakeengine"
)

// The chown helper RunContainer makes beside a member with a read-only
// root (a disk limit) carries the member's labels under another name, and
// no claim record names it: the sweep takes it for no claimed member, and
// leaves the member's workspace alone. A claimed member no record binds is
// removed with its workspace.
func TestUnboundMembersSkipsTheChownHelper(t *testing.T) {
	ctx := context.Background()
	engine := fakeengine.New("afe/busybox:dev")
	making := sandboxspec.MemberIdentity{Namespace: "team", Pool: "agents", PoolUID: "pool-uid", Instance: "default",
		Name: naming.Member(naming.Key("team", "agents"), "0123456789ab")}
	orphan := making
	orphan.Name = naming.Member(naming.Key("team", "agents"), "ba9876543210")
	for _, c := range []struct {
		m    sandboxspec.MemberIdentity
		name string
	}{
		{making, docker.ChownHelperName(making.Name)},
		{orphan, naming.Container(naming.Key("team", "gone"))}, // claimed, its record gone
	} {
		if _, err := engine.EnsureVolume(ctx, sandboxspec.MemberVolume(c.m)); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: c.name, Image: "afe/busybox:dev", Labels: c.m.Labels(afev1.RoleMember)}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sweeper{Engine: engine, Instance: "default"}
	members, err := engine.ListContainers(ctx, map[string]string{afev1.LabelController: "default", afev1.LabelRole: afev1.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.unboundMembers(ctx, members); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.InspectContainer(ctx, docker.ChownHelperName(making.Name)); err != nil {
		t.Fatalf("the helper of a member being made was removed: %v", err)
	}
	if _, err := engine.InspectVolume(ctx, naming.MemberVolume(making.Name)); err != nil {
		t.Fatalf("the workspace of a member being made was removed: %v", err)
	}
	if _, err := engine.InspectContainer(ctx, naming.Container(naming.Key("team", "gone"))); err == nil {
		t.Fatal("a claimed member no record binds was kept")
	}
	if _, err := engine.InspectVolume(ctx, naming.MemberVolume(orphan.Name)); err == nil {
		t.Fatal("the workspace of a claimed member no record binds was kept")
	}
}

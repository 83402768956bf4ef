// Package enginecontract is what the controller relies on of a
// docker.Engine, as cases that run against any implementation: the real
// engine (docker.Client, in this package's tests) and the in-memory fake of
// the fast tier (test/fakeengine, in its tests). A behaviour of the fake
// that the real engine does not share fails here, so the fast tier cannot
// test the controller against an engine that does not exist.
package enginecontract

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/docker"
)

// Harness is what the cases need besides the Engine.
type Harness struct {
	// Image is present on the engine and has sh and sleep.
	Image string
	// Kill ends the first process of a running container with exit code
	// 137, as SIGKILL does, leaving the container exited.
	Kill func(t *testing.T, container string)
	// WriteFile writes a file into a volume; ReadFile reads one ("" when
	// it does not exist).
	WriteFile func(t *testing.T, volume, path, content string)
	ReadFile  func(t *testing.T, volume, path string) string
}

// Run runs every case against the engine, each as a subtest with its own
// labelled objects, removed when it ends.
func Run(t *testing.T, e docker.Engine, h Harness) {
	cases := map[string]func(*testing.T, *fixture){
		"VolumeIsIdempotent":                    volumeIsIdempotent,
		"VolumeInUseIsNotRemoved":               volumeInUseIsNotRemoved,
		"VolumeMountMakesAMissingVolume":        volumeMountMakesAMissingVolume,
		"ContainerIsIdempotent":                 containerIsIdempotent,
		"ContainerOfOtherLabelsIsAConflict":     containerOfOtherLabelsIsAConflict,
		"ExitedContainerIsStartedAgain":         exitedContainerIsStartedAgain,
		"StoppedContainerIsKeptAndStarted":      stoppedContainerIsKeptAndStarted,
		"MissingContainer":                      missingContainer,
		"RenameIsByNameOnly":                    renameIsByNameOnly,
		"MissingImage":                          missingImage,
		"ContainerThatCannotStartLeavesNothing": containerThatCannotStartLeavesNothing,
		"NetworkIsIdempotent":                   networkIsIdempotent,
		"NetworkWithRunningContainerStays":      networkWithRunningContainerStays,
		"EventsOfTheLabelsOnly":                 eventsOfTheLabelsOnly,
		"EventsSinceReplayTheGap":               eventsSinceReplayTheGap,
		"ProcessesHaveTheUsersGroup":            processesHaveTheUsersGroup,
		"GroupProcessesOnlyTheGroup":            groupProcessesOnlyTheGroup,
		"CopyWorkspaceLeavesNoHelper":           copyWorkspaceLeavesNoHelper,
		"CopyWorkspaceRefusesAForeignHelper":    copyWorkspaceRefusesAForeignHelper,
	}
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, e, h)
			cases[name](t, f)
		})
	}
}

// fixture is one case's engine, harness, labels and unique names.
type fixture struct {
	e      docker.Engine
	h      Harness
	ctx    context.Context
	labels map[string]string
	prefix string
}

func newFixture(t *testing.T, e docker.Engine, h Harness) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	id := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	f := &fixture{e: e, h: h, ctx: ctx, labels: map[string]string{"afe.contract": id},
		prefix: "afe-contract-" + id}
	t.Cleanup(func() {
		defer cancel()
		bg := context.Background()
		cs, _ := e.ListContainers(bg, f.labels)
		for _, c := range cs {
			_ = e.RemoveContainer(bg, c.ID)
		}
		ns, _ := e.ListNetworks(bg, f.labels)
		for _, n := range ns {
			_ = e.RemoveNetwork(bg, n.ID)
		}
		vs, _ := e.ListVolumes(bg, f.labels)
		for _, v := range vs {
			_ = e.RemoveVolume(bg, v.Name)
		}
	})
	return f
}

// name is a unique object name of the case.
func (f *fixture) name(suffix string) string { return f.prefix + "-" + suffix }

// with returns the case's labels plus more.
func (f *fixture) with(kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range f.labels {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// spec is a small hardened long-running container of the case.
func (f *fixture) spec(suffix string, mounts ...docker.Mount) docker.ContainerSpec {
	return docker.ContainerSpec{
		Name: f.name(suffix), Image: f.h.Image, Command: []string{"sleep", "600"},
		User: "1000:1000", Labels: f.with("afe.role", "sandbox"), Mounts: mounts, Network: "none",
		CapDrop: []string{"ALL"}, NoNewPrivileges: true, Init: true, MemoryBytes: 64 << 20, PidsLimit: 64,
	}
}

func (f *fixture) run(t *testing.T, spec docker.ContainerSpec) *docker.Container {
	t.Helper()
	c, err := f.e.RunContainer(f.ctx, spec)
	if err != nil {
		t.Fatalf("RunContainer %s: %v", spec.Name, err)
	}
	return c
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantIs(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: want an error that is %q, got %v", what, want, err)
	}
}

// hasLabels fails unless have carries every label of want.
func hasLabels(t *testing.T, have, want map[string]string, what string) {
	t.Helper()
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			t.Fatalf("%s: label %s=%q missing (labels %v)", what, k, v, have)
		}
	}
}

func volumeIsIdempotent(t *testing.T, f *fixture) {
	name := f.name("ws")
	v, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: name, Labels: f.with("afe.role", "workspace")})
	must(t, err, "EnsureVolume")
	if d := cmp.Diff(&docker.Volume{Name: name, Labels: f.with("afe.role", "workspace"), Created: v.Created}, v); d != "" {
		t.Fatalf("created volume (-want +got):\n%s", d)
	}
	// The time it was made, to the engine's precision (a second or finer).
	if since := time.Since(v.Created); since < -time.Minute || since > time.Minute {
		t.Fatalf("created volume: made at %v, %v ago", v.Created, since)
	}
	// An existing volume is returned as it is, whatever the spec's labels:
	// the caller checks them.
	again, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: name, Labels: f.with("afe.role", "other")})
	must(t, err, "EnsureVolume again")
	if d := cmp.Diff(v, again); d != "" {
		t.Fatalf("second EnsureVolume (-first +second):\n%s", d)
	}
	got, err := f.e.InspectVolume(f.ctx, name)
	must(t, err, "InspectVolume")
	if d := cmp.Diff(v, got); d != "" {
		t.Fatalf("InspectVolume (-want +got):\n%s", d)
	}
	list, err := f.e.ListVolumes(f.ctx, f.labels)
	must(t, err, "ListVolumes")
	if d := cmp.Diff([]docker.Volume{*v}, list); d != "" {
		t.Fatalf("ListVolumes (-want +got):\n%s", d)
	}
	if list, _ := f.e.ListVolumes(f.ctx, f.with("afe.role", "other")); len(list) != 0 {
		t.Fatalf("ListVolumes with a label it lacks: %v", list)
	}
	must(t, f.e.RemoveVolume(f.ctx, name), "RemoveVolume")
	must(t, f.e.RemoveVolume(f.ctx, name), "RemoveVolume of a removed volume")
	_, err = f.e.InspectVolume(f.ctx, name)
	wantIs(t, err, docker.ErrNotFound, "InspectVolume of a removed volume")
}

func volumeInUseIsNotRemoved(t *testing.T, f *fixture) {
	name := f.name("ws")
	_, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: name, Labels: f.labels})
	must(t, err, "EnsureVolume")
	c := f.run(t, f.spec("c", docker.Mount{Type: docker.MountVolume, Source: name, Target: "/workspace"}))
	wantIs(t, f.e.RemoveVolume(f.ctx, name), docker.ErrConflict, "RemoveVolume of a mounted volume")
	f.h.Kill(t, c.Name)
	wantIs(t, f.e.RemoveVolume(f.ctx, name), docker.ErrConflict, "RemoveVolume of a volume an exited container mounts")
	must(t, f.e.RemoveContainer(f.ctx, c.ID), "RemoveContainer")
	if _, err := f.e.InspectVolume(f.ctx, name); err != nil {
		t.Fatalf("RemoveContainer removed the named volume: %v", err)
	}
	must(t, f.e.RemoveVolume(f.ctx, name), "RemoveVolume once unused")
}

func volumeMountMakesAMissingVolume(t *testing.T, f *fixture) {
	name := f.name("made")
	labels := f.with("afe.role", "workspace")
	f.run(t, f.spec("c", docker.Mount{Type: docker.MountVolume, Source: name, Target: "/workspace", Labels: labels}))
	v, err := f.e.InspectVolume(f.ctx, name)
	must(t, err, "InspectVolume of the volume the mount made")
	hasLabels(t, v.Labels, labels, "volume made by a mount")
}

func containerIsIdempotent(t *testing.T, f *fixture) {
	ws := f.name("ws")
	_, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: ws, Labels: f.labels})
	must(t, err, "EnsureVolume")
	spec := f.spec("c", docker.Mount{Type: docker.MountVolume, Source: ws, Target: "/workspace"})
	c := f.run(t, spec)
	if !c.Running || c.State != "running" || c.ID == "" || c.Name != spec.Name || c.Image != spec.Image ||
		c.User != spec.User || c.Pid <= 0 || c.StartedAt.IsZero() || c.ExitCode != 0 {
		t.Fatalf("created container: %+v", c)
	}
	hasLabels(t, c.Labels, spec.Labels, "created container")
	if _, ok := c.IPs["none"]; !ok || len(c.IPs) != 1 {
		t.Fatalf("a container on network none: IPs %v", c.IPs)
	}
	if len(c.Mounts) != 1 || c.Mounts[0].Type != docker.MountVolume || c.Mounts[0].Destination != "/workspace" ||
		!strings.Contains(c.Mounts[0].Source, ws) {
		t.Fatalf("mounts: %+v", c.Mounts)
	}
	again := f.run(t, spec)
	if again.ID != c.ID || !again.Running || !again.StartedAt.Equal(c.StartedAt) {
		t.Fatalf("RunContainer of a running container made or restarted one: %+v, was %+v", again, c)
	}
	for _, ref := range []string{c.Name, c.ID, c.ID[:12]} {
		got, err := f.e.InspectContainer(f.ctx, ref)
		must(t, err, "InspectContainer "+ref)
		if got.ID != c.ID || got.Name != c.Name {
			t.Fatalf("InspectContainer %s: %+v", ref, got)
		}
	}
	list, err := f.e.ListContainers(f.ctx, f.labels)
	must(t, err, "ListContainers")
	if len(list) != 1 || list[0].ID != c.ID || list[0].Name != c.Name || !list[0].Running || list[0].State != "running" {
		t.Fatalf("ListContainers: %+v", list)
	}
	code, err := f.e.Exec(f.ctx, c.ID, docker.ExecSpec{Cmd: []string{"true"}, User: "1000:1000"})
	if err != nil || code != 0 {
		t.Fatalf("Exec true: %d, %v", code, err)
	}
	must(t, f.e.RemoveContainer(f.ctx, c.ID), "RemoveContainer")
	must(t, f.e.RemoveContainer(f.ctx, c.ID), "RemoveContainer of a removed container")
	_, err = f.e.InspectContainer(f.ctx, c.Name)
	wantIs(t, err, docker.ErrNotFound, "InspectContainer of a removed container")
}

func containerOfOtherLabelsIsAConflict(t *testing.T, f *fixture) {
	spec := f.spec("c")
	c := f.run(t, spec)
	other := spec
	other.Labels = f.with("afe.role", "sandbox", "afe.sandbox-uid", "someone-else")
	_, err := f.e.RunContainer(f.ctx, other)
	wantIs(t, err, docker.ErrConflict, "RunContainer over a container of other labels")
	got, err := f.e.InspectContainer(f.ctx, spec.Name)
	must(t, err, "InspectContainer")
	if got.ID != c.ID || !got.Running {
		t.Fatalf("the conflict touched the existing container: %+v", got)
	}
	// The spec's labels are a subset of the existing ones: adopted.
	fewer := spec
	fewer.Labels = f.labels
	if again := f.run(t, fewer); again.ID != c.ID {
		t.Fatalf("a container carrying the spec's labels was not adopted: %+v", again)
	}
}

func exitedContainerIsStartedAgain(t *testing.T, f *fixture) {
	spec := f.spec("c")
	c := f.run(t, spec)
	f.h.Kill(t, c.Name)
	got, err := f.e.InspectContainer(f.ctx, c.ID)
	must(t, err, "InspectContainer")
	if got.Running || got.State != "exited" || got.ExitCode != 137 || got.Pid != 0 {
		t.Fatalf("killed container: %+v", got)
	}
	_, err = f.e.Exec(f.ctx, c.ID, docker.ExecSpec{Cmd: []string{"true"}})
	wantIs(t, err, docker.ErrConflict, "Exec in an exited container")
	_, err = f.e.Processes(f.ctx, c.ID)
	wantIs(t, err, docker.ErrConflict, "Processes of an exited container")
	list, err := f.e.ListContainers(f.ctx, f.labels)
	must(t, err, "ListContainers")
	if len(list) != 1 || list[0].Running || list[0].State != "exited" {
		t.Fatalf("ListContainers lists an exited container as %+v", list)
	}
	again := f.run(t, spec)
	if again.ID != c.ID || !again.Running || !again.StartedAt.After(c.StartedAt) {
		t.Fatalf("RunContainer of an exited container: %+v, was %+v", again, c)
	}
}

func stoppedContainerIsKeptAndStarted(t *testing.T, f *fixture) {
	c := f.run(t, f.spec("c"))
	n, err := f.e.RunningExecs(f.ctx, c.ID)
	must(t, err, "RunningExecs")
	if n != 0 {
		t.Fatalf("RunningExecs of a container without commands = %d", n)
	}
	must(t, f.e.StopContainer(f.ctx, c.ID), "StopContainer")
	must(t, f.e.StopContainer(f.ctx, c.ID), "StopContainer of a stopped container")
	got, err := f.e.InspectContainer(f.ctx, c.Name)
	must(t, err, "InspectContainer")
	if got.ID != c.ID || got.Running || got.State != "exited" || got.Pid != 0 {
		t.Fatalf("stopped container: %+v", got)
	}
	n, err = f.e.RunningExecs(f.ctx, c.ID)
	must(t, err, "RunningExecs of a stopped container")
	if n != 0 {
		t.Fatalf("RunningExecs of a stopped container = %d", n)
	}
	_, err = f.e.Exec(f.ctx, c.ID, docker.ExecSpec{Cmd: []string{"true"}})
	wantIs(t, err, docker.ErrConflict, "Exec in a stopped container")
	must(t, f.e.StartContainer(f.ctx, c.ID), "StartContainer")
	must(t, f.e.StartContainer(f.ctx, c.ID), "StartContainer of a running container")
	again, err := f.e.InspectContainer(f.ctx, c.Name)
	must(t, err, "InspectContainer")
	if again.ID != c.ID || !again.Running || !again.StartedAt.After(c.StartedAt) {
		t.Fatalf("started again: %+v, was %+v", again, c)
	}
	name := f.name("absent")
	wantIs(t, f.e.StopContainer(f.ctx, name), docker.ErrNotFound, "StopContainer of a missing container")
	wantIs(t, f.e.StartContainer(f.ctx, name), docker.ErrNotFound, "StartContainer of a missing container")
	_, err = f.e.RunningExecs(f.ctx, name)
	wantIs(t, err, docker.ErrNotFound, "RunningExecs of a missing container")
}

func missingContainer(t *testing.T, f *fixture) {
	name := f.name("absent")
	_, err := f.e.InspectContainer(f.ctx, name)
	wantIs(t, err, docker.ErrNotFound, "InspectContainer")
	_, err = f.e.Exec(f.ctx, name, docker.ExecSpec{Cmd: []string{"true"}})
	wantIs(t, err, docker.ErrNotFound, "Exec")
	_, err = f.e.Processes(f.ctx, name)
	wantIs(t, err, docker.ErrNotFound, "Processes")
	must(t, f.e.RemoveContainer(f.ctx, name), "RemoveContainer")
	_, err = f.e.InspectNetwork(f.ctx, name)
	wantIs(t, err, docker.ErrNotFound, "InspectNetwork")
	must(t, f.e.RemoveNetwork(f.ctx, name), "RemoveNetwork")
}

// A rename names the container by its current name: once renamed, the old
// name renames nothing, and a name another container has is refused.
func renameIsByNameOnly(t *testing.T, f *fixture) {
	a := f.run(t, f.spec("a"))
	b := f.run(t, f.spec("b"))
	must(t, f.e.RenameContainer(f.ctx, f.name("a"), f.name("a2")), "RenameContainer")
	got, err := f.e.InspectContainer(f.ctx, f.name("a2"))
	must(t, err, "InspectContainer of the new name")
	if got.ID != a.ID || !got.Running {
		t.Fatalf("the new name is container %s (running %t), want the renamed %s running", got.ID, got.Running, a.ID)
	}
	_, err = f.e.InspectContainer(f.ctx, f.name("a"))
	wantIs(t, err, docker.ErrNotFound, "InspectContainer of the old name")
	wantIs(t, f.e.RenameContainer(f.ctx, f.name("a"), f.name("a3")), docker.ErrNotFound, "a second rename of the old name")
	wantIs(t, f.e.RenameContainer(f.ctx, f.name("a2"), f.name("b")), docker.ErrConflict, "a rename to a taken name")
	got, err = f.e.InspectContainer(f.ctx, f.name("b"))
	must(t, err, "InspectContainer of the taken name")
	if got.ID != b.ID {
		t.Fatalf("the taken name now names %s, want %s", got.ID, b.ID)
	}
	wantIs(t, f.e.RenameContainer(f.ctx, a.ID, f.name("a4")), docker.ErrConflict, "a rename by ID")
}

func missingImage(t *testing.T, f *fixture) {
	const absent = "afe/contract-absent:none"
	var pe *docker.PullError
	if err := f.e.EnsureImage(f.ctx, absent); !errors.As(err, &pe) || pe.Ref != absent {
		t.Fatalf("EnsureImage of an image no registry has: want a *docker.PullError, got %v", err)
	}
	if err := f.e.EnsureImage(f.ctx, "Not A Reference"); !errors.As(err, &pe) {
		t.Fatalf("EnsureImage of an invalid reference: want a *docker.PullError, got %v", err)
	}
	must(t, f.e.EnsureImage(f.ctx, f.h.Image), "EnsureImage of a present image")
	spec := f.spec("c")
	spec.Image = absent
	_, err := f.e.RunContainer(f.ctx, spec)
	wantIs(t, err, docker.ErrNotFound, "RunContainer of an absent image")
}

func containerThatCannotStartLeavesNothing(t *testing.T, f *fixture) {
	spec := f.spec("c")
	spec.Network = "bridge"
	spec.ExtraNetworks = []string{f.name("absent-net")}
	if _, err := f.e.RunContainer(f.ctx, spec); err == nil {
		t.Fatal("RunContainer onto a missing network succeeded")
	}
	_, err := f.e.InspectContainer(f.ctx, spec.Name)
	wantIs(t, err, docker.ErrNotFound, "InspectContainer of a container that could not start")
}

func networkIsIdempotent(t *testing.T, f *fixture) {
	spec := docker.NetworkSpec{Name: f.name("net"), Labels: f.with("afe.role", "network"), Internal: true, NoHostAddress: true}
	n, err := f.e.EnsureNetwork(f.ctx, spec)
	must(t, err, "EnsureNetwork")
	if n.ID == "" || n.Name != spec.Name || !n.Internal || len(n.Gateways) == 0 {
		t.Fatalf("created network: %+v", n)
	}
	hasLabels(t, n.Labels, spec.Labels, "created network")
	again, err := f.e.EnsureNetwork(f.ctx, docker.NetworkSpec{Name: spec.Name, Labels: f.labels})
	must(t, err, "EnsureNetwork again")
	if again.ID != n.ID {
		t.Fatalf("EnsureNetwork made a second network: %+v, first %+v", again, n)
	}
	for _, ref := range []string{n.Name, n.ID} {
		got, err := f.e.InspectNetwork(f.ctx, ref)
		must(t, err, "InspectNetwork "+ref)
		if d := cmp.Diff(n, got); d != "" {
			t.Fatalf("InspectNetwork %s (-want +got):\n%s", ref, d)
		}
	}
	if _, err := f.e.InspectNetwork(f.ctx, n.ID[:12]); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("InspectNetwork by an ID prefix: want ErrNotFound (only exact names count), got %v", err)
	}
	list, err := f.e.ListNetworks(f.ctx, f.labels)
	must(t, err, "ListNetworks")
	if len(list) != 1 || list[0].ID != n.ID || list[0].Name != n.Name || !list[0].Internal {
		t.Fatalf("ListNetworks: %+v", list)
	}
	bridge, err := f.e.InspectNetwork(f.ctx, "bridge")
	must(t, err, "InspectNetwork bridge")
	if bridge.Internal {
		t.Fatalf("the engine's bridge: %+v", bridge)
	}
	must(t, f.e.RemoveNetwork(f.ctx, n.ID), "RemoveNetwork")
	must(t, f.e.RemoveNetwork(f.ctx, n.ID), "RemoveNetwork of a removed network")
	_, err = f.e.InspectNetwork(f.ctx, n.Name)
	wantIs(t, err, docker.ErrNotFound, "InspectNetwork of a removed network")
}

func networkWithRunningContainerStays(t *testing.T, f *fixture) {
	internal, err := f.e.EnsureNetwork(f.ctx, docker.NetworkSpec{Name: f.name("int"), Labels: f.labels, Internal: true})
	must(t, err, "EnsureNetwork")
	spec := f.spec("c")
	spec.Network = internal.Name
	spec.ExtraNetworks = []string{"bridge"}
	c := f.run(t, spec)
	if c.IPs[internal.Name] == "" || c.IPs["bridge"] == "" || len(c.IPs) != 2 {
		t.Fatalf("a container on two networks: IPs %v", c.IPs)
	}
	err = f.e.RemoveNetwork(f.ctx, internal.ID)
	if err == nil || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("RemoveNetwork with a running container on it: want an error, got %v", err)
	}
	// An exited container is not in the way, and cannot start again on
	// the network it lost.
	f.h.Kill(t, c.Name)
	must(t, f.e.RemoveNetwork(f.ctx, internal.ID), "RemoveNetwork with an exited container on it")
	if _, err := f.e.RunContainer(f.ctx, spec); err == nil {
		t.Fatal("a container whose network is gone was started again")
	}
}

func eventsOfTheLabelsOnly(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	events, errs := f.e.Events(ctx, f.labels, time.Time{})
	// A container without the labels reports nothing to this stream.
	stranger := f.spec("stranger")
	stranger.Labels = map[string]string{"afe.contract-stranger": f.prefix}
	s := f.run(t, stranger)
	must(t, f.e.RemoveContainer(f.ctx, s.ID), "RemoveContainer of the stranger")
	c := f.run(t, f.spec("c"))
	must(t, f.e.RemoveContainer(f.ctx, c.ID), "RemoveContainer")
	var seen []docker.EventAction
	timeout := time.After(30 * time.Second)
	for len(seen) < 4 {
		select {
		case ev := <-events:
			if ev.ID != c.ID || ev.Name != c.Name {
				t.Fatalf("an event of another container: %+v", ev)
			}
			hasLabels(t, ev.Labels, f.spec("c").Labels, "event")
			seen = append(seen, ev.Action)
		case err := <-errs:
			t.Fatalf("the stream broke: %v", err)
		case <-timeout:
			t.Fatalf("saw only %v", seen)
		}
	}
	want := []docker.EventAction{docker.ActionCreate, docker.ActionStart, docker.ActionDie, docker.ActionDestroy}
	if d := cmp.Diff(want, seen); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	cancel()
	select {
	case err := <-errs:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a stream whose context ended: want context.Canceled, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with its context")
	}
	for range events { //nolint:revive // drained until closed
	}
}

// eventsSinceReplayTheGap: a stream asked for since a time first gives the
// events from then on that it would have given, as a stream started again
// after a break does.
func eventsSinceReplayTheGap(t *testing.T, f *fixture) {
	// The engine states event times to the nanosecond; a little earlier
	// than now covers a clock read before the engine's.
	since := time.Now().Add(-time.Millisecond)
	c := f.run(t, f.spec("c"))
	must(t, f.e.RemoveContainer(f.ctx, c.ID), "RemoveContainer")
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	events, errs := f.e.Events(ctx, f.labels, since)
	var seen []docker.EventAction
	timeout := time.After(30 * time.Second)
	for len(seen) < 4 {
		select {
		case ev := <-events:
			if ev.ID == c.ID {
				seen = append(seen, ev.Action)
			}
		case err := <-errs:
			t.Fatalf("the stream broke: %v", err)
		case <-timeout:
			t.Fatalf("replayed only %v", seen)
		}
	}
	want := []docker.EventAction{docker.ActionCreate, docker.ActionStart, docker.ActionDie, docker.ActionDestroy}
	if d := cmp.Diff(want, seen); d != "" {
		t.Fatalf("replayed events (-want +got):\n%s", d)
	}
}

func processesHaveTheUsersGroup(t *testing.T, f *fixture) {
	c := f.run(t, f.spec("c"))
	ps, err := f.e.Processes(f.ctx, c.ID)
	must(t, err, "Processes")
	if len(ps) == 0 {
		t.Fatal("a running container has no processes")
	}
	for _, p := range ps {
		if !p.HasGroup(1000) || p.Zombie() || p.PID <= 0 {
			t.Fatalf("a process of a container running as 1000:1000: %+v", p)
		}
	}
}

func groupProcessesOnlyTheGroup(t *testing.T, f *fixture) {
	c := f.run(t, f.spec("c"))
	ps, err := f.e.GroupProcesses(f.ctx, c.ID, 1000)
	must(t, err, "GroupProcesses")
	if len(ps) == 0 {
		t.Fatal("a container running as 1000:1000 has no process of group 1000")
	}
	for _, p := range ps {
		if !p.HasGroup(1000) {
			t.Fatalf("a process of group 1000: %+v", p)
		}
	}
	ps, err = f.e.GroupProcesses(f.ctx, c.ID, 4242)
	must(t, err, "GroupProcesses")
	if len(ps) != 0 {
		t.Fatalf("no process has group 4242: %+v", ps)
	}
}

func copyWorkspaceLeavesNoHelper(t *testing.T, f *fixture) {
	from, to := f.name("from"), f.name("to")
	for _, v := range []string{from, to} {
		_, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: v, Labels: f.labels})
		must(t, err, "EnsureVolume "+v)
	}
	f.h.WriteFile(t, from, "notes.txt", "kept")
	copyLabels := f.with("afe.role", "snapshot-copy")
	spec := docker.CopySpec{Name: f.name("copy"), Image: f.h.Image, Labels: copyLabels,
		From: docker.Mount{Type: docker.MountVolume, Source: from}, To: docker.Mount{Type: docker.MountVolume, Source: to}}
	// A helper of the copy's labels that a crash left is replaced.
	_, err := f.e.RunContainer(f.ctx, docker.ContainerSpec{Name: spec.Name + "-from", Image: f.h.Image,
		Command: []string{"sleep", "600"}, Labels: copyLabels, Network: "none"})
	must(t, err, "RunContainer of a stale helper")
	n, err := f.e.CopyWorkspace(f.ctx, spec)
	must(t, err, "CopyWorkspace")
	if n <= 0 {
		t.Fatalf("CopyWorkspace copied %d bytes", n)
	}
	if got := f.h.ReadFile(t, to, "notes.txt"); got != "kept" {
		t.Fatalf("the copy holds %q", got)
	}
	if left, _ := f.e.ListContainers(f.ctx, copyLabels); len(left) != 0 {
		t.Fatalf("helpers left: %+v", left)
	}
}

func copyWorkspaceRefusesAForeignHelper(t *testing.T, f *fixture) {
	from, to := f.name("from"), f.name("to")
	for _, v := range []string{from, to} {
		_, err := f.e.EnsureVolume(f.ctx, docker.VolumeSpec{Name: v, Labels: f.labels})
		must(t, err, "EnsureVolume "+v)
	}
	spec := docker.CopySpec{Name: f.name("copy"), Image: f.h.Image, Labels: f.with("afe.role", "snapshot-copy"),
		From: docker.Mount{Type: docker.MountVolume, Source: from}, To: docker.Mount{Type: docker.MountVolume, Source: to}}
	foreign := f.run(t, docker.ContainerSpec{Name: spec.Name + "-to", Image: f.h.Image,
		Command: []string{"sleep", "600"}, Labels: f.with("afe.role", "sandbox"), Network: "none"})
	_, err := f.e.CopyWorkspace(f.ctx, spec)
	wantIs(t, err, docker.ErrConflict, "CopyWorkspace over a helper name taken by another container")
	got, err := f.e.InspectContainer(f.ctx, foreign.ID)
	if err != nil || !got.Running {
		t.Fatalf("the foreign container was touched: %+v, %v", got, err)
	}
	if left, _ := f.e.ListContainers(f.ctx, spec.Labels); len(left) != 0 {
		t.Fatalf("helpers left: %+v", left)
	}
}

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// The baselines: the plain docker CLI doing the work the controller does for
// a sandbox, with the same objects (the controller's own specs, rendered as
// CLI flags), one process per step as a script would run them.

// dockerCLI runs `docker args...`, feeding stdin, and fails with its output.
func dockerCLI(ctx context.Context, stdin []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, "docker", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createArgs renders a container spec as `docker create` arguments: the
// same configuration the docker package sends to the engine.
// Long on purpose: one flag per field of the spec, in its order, so that a
// field the CLI twin leaves out shows at a glance.
func createArgs(spec docker.ContainerSpec) []string {
	args := []string{"create", "--name", spec.Name, "--ipc", "private", "--restart", "no"}
	if spec.Entrypoint != nil {
		args = append(args, "--entrypoint", strings.Join(spec.Entrypoint, " "))
	}
	if spec.User != "" {
		args = append(args, "--user", spec.User)
	}
	if spec.WorkingDir != "" {
		args = append(args, "--workdir", spec.WorkingDir)
	}
	for _, e := range spec.Env {
		args = append(args, "--env", e)
	}
	for _, k := range sortedKeys(spec.Labels) {
		args = append(args, "--label", k+"="+spec.Labels[k])
	}
	for _, m := range spec.Mounts {
		opt := fmt.Sprintf("type=%s,src=%s,dst=%s", m.Type, m.Source, m.Target)
		if m.Type == docker.MountBind {
			opt += ",bind-propagation=rprivate"
		}
		for _, k := range sortedKeys(m.Labels) {
			opt += ",volume-label=" + k + "=" + m.Labels[k]
		}
		args = append(args, "--mount", opt)
	}
	network := spec.Network
	if network == "" {
		network = "none"
	}
	args = append(args, "--network", network)
	for _, a := range spec.Aliases {
		args = append(args, "--network-alias", a)
	}
	if spec.IPv4Address != "" {
		args = append(args, "--ip", spec.IPv4Address)
	}
	for _, d := range spec.DNS {
		args = append(args, "--dns", d)
	}
	if spec.NanoCPUs > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(float64(spec.NanoCPUs)/1e9, 'f', -1, 64))
	}
	if spec.MemoryBytes > 0 {
		m := strconv.FormatInt(spec.MemoryBytes, 10)
		args = append(args, "--memory", m, "--memory-swap", m)
	}
	if spec.PidsLimit > 0 {
		args = append(args, "--pids-limit", strconv.FormatInt(spec.PidsLimit, 10))
	}
	for _, u := range spec.Ulimits {
		args = append(args, "--ulimit", fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	for _, c := range spec.CapDrop {
		args = append(args, "--cap-drop", c)
	}
	for _, c := range spec.CapAdd {
		args = append(args, "--cap-add", c)
	}
	if spec.NoNewPrivileges {
		args = append(args, "--security-opt", "no-new-privileges:true")
	}
	if spec.ReadOnlyRootfs {
		args = append(args, "--read-only")
	}
	for _, p := range sortedKeys(spec.Tmpfs) {
		args = append(args, "--tmpfs", p+":"+spec.Tmpfs[p])
	}
	if spec.OpenStdin {
		args = append(args, "--interactive")
	}
	if spec.Init {
		args = append(args, "--init")
	}
	args = append(args, spec.Image)
	return append(args, spec.Command...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ownerTar is the archive `docker cp` extracts to make a fresh volume's
// mount point owned by the sandbox user, as the controller does.
func ownerTar(m docker.Mount) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Trim(path.Clean(m.Target), "/") + "/",
		Mode: 0o755, Uid: m.Owner.UID, Gid: m.Owner.GID, ModTime: time.Now()})
	_ = tw.Close()
	return buf.Bytes()
}

// cliSandbox is one sandbox made by the CLI: the controller's specs for it,
// under a name and labels of the baseline's own.
type cliSandbox struct {
	volume  docker.VolumeSpec
	network *docker.NetworkSpec
	proxy   *docker.ContainerSpec
	sandbox docker.ContainerSpec
}

// newCLISandbox renders the objects the controller makes for sbx (a Sandbox
// as the API server defaulted it) under instance.
func newCLISandbox(sbx *afev1.Sandbox, instance string, proxy sandboxspec.ProxyOptions) cliSandbox {
	id := sandboxspec.IdentityOf(sbx, instance)
	out := cliSandbox{volume: sandboxspec.Volume(id)}
	resolved := sandboxspec.Resolved{Workspace: out.volume.Name, Network: "none"}
	if len(sbx.Spec.Egress) > 0 {
		n := sandboxspec.Network(id)
		allow, err := sandboxspec.ProxyAllowlist(sbx, proxy)
		if err != nil {
			panic(err) // the bench's own sandboxes, valid
		}
		p := sandboxspec.Proxy(sbx, id, proxy, allow)
		out.network, out.proxy = &n, &p
		resolved.Network, resolved.ProxyEnv = n.Name, sandboxspec.ProxyEnvFor()
	}
	out.sandbox = sandboxspec.Container(sbx, id, resolved)
	return out
}

// create makes the sandbox with the CLI, proxy first, and returns when its
// container runs (and its proxy answers).
func (s cliSandbox) create(ctx context.Context) error {
	if err := dockerCLI(ctx, nil, append(append([]string{"volume", "create"}, labelArgs(s.volume.Labels)...), s.volume.Name)...); err != nil {
		return err
	}
	if s.network != nil {
		args := append([]string{"network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true"}, labelArgs(s.network.Labels)...)
		if err := dockerCLI(ctx, nil, append(args, s.network.Name)...); err != nil {
			return err
		}
		if err := createAndStart(ctx, *s.proxy); err != nil {
			return err
		}
		if err := probeProxy(ctx, s.proxy.Name); err != nil {
			return err
		}
	}
	return createAndStart(ctx, s.sandbox)
}

// createAndStart is `docker create`, `docker cp` of the mount owners,
// `docker network connect` of the extra networks, `docker start`.
func createAndStart(ctx context.Context, spec docker.ContainerSpec) error {
	if err := dockerCLI(ctx, nil, createArgs(spec)...); err != nil {
		return err
	}
	for _, m := range spec.Mounts {
		if m.Owner != nil {
			if err := dockerCLI(ctx, ownerTar(m), "cp", "-", spec.Name+":/"); err != nil {
				return err
			}
		}
	}
	for _, n := range spec.ExtraNetworks {
		if err := dockerCLI(ctx, nil, "network", "connect", n, spec.Name); err != nil {
			return err
		}
	}
	return dockerCLI(ctx, nil, "start", spec.Name)
}

// probeProxy runs the proxy's probe until squid answers, as the controller
// does before it calls the egress path ready.
func probeProxy(ctx context.Context, name string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := dockerCLI(ctx, nil, "exec", name, sandboxspec.ProxyProbe)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remove removes what create made: containers, then network, then volume.
func (s cliSandbox) remove(ctx context.Context) error {
	names := []string{s.sandbox.Name}
	if s.proxy != nil {
		names = append(names, s.proxy.Name)
	}
	if err := dockerCLI(ctx, nil, append([]string{"rm", "-f"}, names...)...); err != nil {
		return err
	}
	if s.network != nil {
		if err := dockerCLI(ctx, nil, "network", "rm", s.network.Name); err != nil {
			return err
		}
	}
	return dockerCLI(ctx, nil, "volume", "rm", s.volume.Name)
}

// replace is what a script does when the sandbox container was lost: a
// fresh workspace volume and a new container.
func (s cliSandbox) replace(ctx context.Context) error {
	if err := dockerCLI(ctx, nil, "volume", "rm", s.volume.Name); err != nil {
		return err
	}
	if err := dockerCLI(ctx, nil, append(append([]string{"volume", "create"}, labelArgs(s.volume.Labels)...), s.volume.Name)...); err != nil {
		return err
	}
	return createAndStart(ctx, s.sandbox)
}

func labelArgs(labels map[string]string) []string {
	var args []string
	for _, k := range sortedKeys(labels) {
		args = append(args, "--label", k+"="+labels[k])
	}
	return args
}

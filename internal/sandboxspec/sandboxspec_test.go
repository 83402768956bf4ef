package sandboxspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

func validSpec() afev1.SandboxTemplateSpec {
	return afev1.SandboxTemplateSpec{
		Image:          "afe/busybox:dev",
		TimeoutSeconds: 600,
		User:           "1000:1000",
		Resources: afev1.SandboxResources{
			CPU:    ptr.To(resource.MustParse("1")),
			Memory: ptr.To(resource.MustParse("1Gi")),
			Pids:   512,
		},
		Workspace: afev1.WorkspaceSpec{Type: afev1.WorkspaceVolume},
	}
}

func TestValidate(t *testing.T) {
	// Validate checks a Folder's path as written; what is on the disk
	// (symbolic links, files, missing folders) is TestResolveFolder's.
	root := t.TempDir()
	inside := filepath.Join(root, "ns", "tk-1")
	outside := t.TempDir()
	must(t, os.MkdirAll(inside, 0o755))
	tests := map[string]struct {
		mutate     func(*afev1.SandboxTemplateSpec)
		opts       Options
		wantReason string
	}{
		"valid":                  {mutate: func(*afev1.SandboxTemplateSpec) {}},
		"uid 0":                  {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "0" }, wantReason: afev1.InvalidSpecReason},
		"uid 00":                 {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "00" }, wantReason: afev1.InvalidSpecReason},
		"0:0":                    {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "0:0" }, wantReason: afev1.InvalidSpecReason},
		"root by name":           {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "root" }, wantReason: afev1.InvalidSpecReason},
		"gid 0":                  {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "1000:0" }, wantReason: afev1.InvalidSpecReason},
		"uid only":               {mutate: func(s *afev1.SandboxTemplateSpec) { s.User = "1234" }},
		"denied env":             {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "DOCKER_HOST", Value: "x"}} }, wantReason: afev1.DeniedEnvReason},
		"denied env, lower case": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "github_token", Value: "x"}} }, wantReason: afev1.DeniedEnvReason},
		"extra denied env":       {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "NPM_TOKEN", Value: "x"}} }, opts: Options{DenyEnv: []string{"NPM_TOKEN"}}, wantReason: afev1.DeniedEnvReason},
		"proxy env":              {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "HTTPS_PROXY", Value: "x"}} }, wantReason: afev1.InvalidSpecReason},
		"env name with space":    {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "A B", Value: "x"}} }, wantReason: afev1.InvalidSpecReason},
		"duplicate env":          {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = []afev1.EnvVar{{Name: "A"}, {Name: "A"}} }, wantReason: afev1.InvalidSpecReason},
		"secret ref":             {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = secretEnv("token.v1", "api-key_2") }},
		"secret of a path":       {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = secretEnv("../ns-b/vsecret", "token") }, wantReason: afev1.InvalidSpecReason},
		"secret name upper case": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = secretEnv("Token", "token") }, wantReason: afev1.InvalidSpecReason},
		"secret key with slash":  {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = secretEnv("token", "a/b") }, wantReason: afev1.InvalidSpecReason},
		"controller env passed through": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("INDEX", "PIP_INDEX_URL") },
			opts: Options{Passthrough: map[string]bool{"PIP_INDEX_URL": true}}},
		"controller env not listed": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("INDEX", "HOME") },
			opts: Options{Passthrough: map[string]bool{"PIP_INDEX_URL": true}}, wantReason: afev1.ControllerEnvNotAllowedReason},
		"controller env listed, unset": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("INDEX", "PIP_INDEX_URL") },
			opts: Options{Passthrough: map[string]bool{"PIP_INDEX_URL": false}}, wantReason: afev1.ControllerEnvNotAllowedReason},
		"controller env without a list": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("INDEX", "PIP_INDEX_URL") },
			wantReason: afev1.ControllerEnvNotAllowedReason},
		"controller env on the deny list": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("INDEX", "GITHUB_TOKEN") },
			opts: Options{Passthrough: map[string]bool{"GITHUB_TOKEN": true}}, wantReason: afev1.DeniedEnvReason},
		"controller env into a denied name": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Env = controllerEnv("DOCKER_HOST", "PIP_INDEX_URL") },
			opts: Options{Passthrough: map[string]bool{"PIP_INDEX_URL": true}}, wantReason: afev1.DeniedEnvReason},
		"controller env and a secret": {mutate: func(s *afev1.SandboxTemplateSpec) {
			s.Env = controllerEnv("INDEX", "PIP_INDEX_URL")
			s.Env[0].ValueFrom.SecretKeyRef = &afev1.SecretKeySelector{Name: "s", Key: "k"}
		}, opts: Options{Passthrough: map[string]bool{"PIP_INDEX_URL": true}}, wantReason: afev1.InvalidSpecReason},
		"valueFrom with neither": {mutate: func(s *afev1.SandboxTemplateSpec) {
			s.Env = []afev1.EnvVar{{Name: "A", ValueFrom: &afev1.EnvVarSource{}}}
		},
			wantReason: afev1.InvalidSpecReason},
		"disk on a folder": {mutate: func(s *afev1.SandboxTemplateSpec) {
			s.Resources.Disk = ptr.To(resource.MustParse("1Gi"))
			s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside}
		}, opts: Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true}, wantReason: afev1.InvalidSpecReason},
		"egress ok":         {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{"example.com", ".pypi.org"} }},
		"egress ip":         {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{"10.0.0.1"} }, wantReason: afev1.InvalidSpecReason},
		"egress port":       {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{"example.com:443"} }, wantReason: afev1.InvalidSpecReason},
		"egress wildcard":   {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{"*.example.com"} }, wantReason: afev1.InvalidSpecReason},
		"egress tld only":   {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{".com"} }, wantReason: afev1.InvalidSpecReason},
		"egress newline":    {mutate: func(s *afev1.SandboxTemplateSpec) { s.Egress = []afev1.EgressHost{"a.com\nb.com"} }, wantReason: afev1.InvalidSpecReason},
		"too little memory": {mutate: func(s *afev1.SandboxTemplateSpec) { s.Resources.Memory = ptr.To(resource.MustParse("1Mi")) }, wantReason: afev1.InvalidSpecReason},
		"folder without root": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside}
			},
			wantReason: afev1.WorkspaceOutsideRootReason,
		},
		"folder inside root": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside}
			},
			opts: Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true},
		},
		"folder is the root": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: root}
			},
			opts:       Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true},
			wantReason: afev1.WorkspaceOutsideRootReason,
		},
		"folder with dot-dot": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside + "/../../" + filepath.Base(outside)}
			},
			opts:       Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true},
			wantReason: afev1.WorkspaceOutsideRootReason,
		},
		"folder is the namespace folder": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: filepath.Dir(inside)}
			},
			opts:       Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true},
			wantReason: afev1.WorkspaceOutsideRootReason,
		},
		"folder on a remote engine": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside}
			},
			opts:       Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true, EngineRemote: true},
			wantReason: afev1.WorkspaceNotSharedReason,
		},
		"folder on a remote engine that shares the root": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: inside}
			},
			opts: Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true, EngineRemote: true, WorkspaceRootShared: true},
		},
		"docker socket as folder": {
			mutate: func(s *afev1.SandboxTemplateSpec) {
				s.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/var/run/docker.sock"}
			},
			opts:       Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true},
			wantReason: afev1.WorkspaceOutsideRootReason,
		},
		"hostPath on a volume": {
			mutate:     func(s *afev1.SandboxTemplateSpec) { s.Workspace.HostPath = inside },
			wantReason: afev1.InvalidSpecReason,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(&spec)
			err := Validate(&spec, tc.opts)
			got := ""
			if err != nil {
				ie, ok := AsInvalid(err)
				if !ok {
					t.Fatalf("not an InvalidError: %v", err)
				}
				got = ie.Reason
				if ie.Message == "" || strings.ToUpper(ie.Message[:1]) != ie.Message[:1] {
					t.Fatalf("message should be capitalised: %q", ie.Message)
				}
			}
			if got != tc.wantReason {
				t.Fatalf("reason: want %q, got %q (%v)", tc.wantReason, got, err)
			}
		})
	}
}

func TestParseUser(t *testing.T) {
	tests := map[string]struct {
		in       string
		uid, gid int
		wantErr  bool
	}{
		"uid":            {in: "1000", uid: 1000, gid: 1000},
		"uid:gid":        {in: "1000:2000", uid: 1000, gid: 2000},
		"leading zeroes": {in: "0100", uid: 100, gid: 100},
		"root":           {in: "0", wantErr: true},
		"root padded":    {in: "000", wantErr: true},
		"root group":     {in: "5:0", wantErr: true},
		"name":           {in: "nobody", wantErr: true},
		"negative":       {in: "-1", wantErr: true},
		"huge":           {in: "99999999999", wantErr: true},
		"empty":          {in: "", wantErr: true},
		"space":          {in: "1000 ", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			uid, gid, err := ParseUser(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && (uid != tc.uid || gid != tc.gid) {
				t.Fatalf("got %d:%d", uid, gid)
			}
		})
	}
}

func testSandbox() *afev1.Sandbox {
	return &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tk-1", UID: "uid-1"},
		Spec:       afev1.SandboxSpec{Scope: "main", SandboxTemplateSpec: validSpec()},
	}
}

func TestContainerIsHardened(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Resources.CPU = ptr.To(resource.MustParse("500m"))
	sbx.Spec.Resources.Memory = ptr.To(resource.MustParse("256Mi"))
	id := IdentityOf(sbx, "default")
	got := Container(sbx, id, Resolved{Env: []string{"A=1"}, Workspace: "afe-team.tk-1-ws"})
	hash := got.Labels[afev1.LabelSpecHash]
	want := enginespec.ContainerSpec{
		Name:       "afe-team.tk-1",
		Image:      "afe/busybox:dev",
		Entrypoint: []string{},
		Command:    KeepAlive,
		User:       "1000:1000",
		WorkingDir: "/workspace",
		Env:        []string{},
		Mounts: []enginespec.Mount{{Type: enginespec.MountVolume, Source: "afe-team.tk-1-ws", Target: "/workspace", Owner: &enginespec.Owner{UID: 1000, GID: 1000},
			Labels: IdentityOf(sbx, "default").Labels(afev1.RoleWorkspace)}},
		Network:         "none",
		NanoCPUs:        500_000_000,
		MemoryBytes:     256 << 20,
		PidsLimit:       512,
		Ulimits:         []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, {Name: "nofile", Soft: 4096, Hard: 4096}},
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		Init:            true,
		OpenStdin:       true,
		Log:             &enginespec.LogConfig{MaxFileBytes: 512 << 10, Files: 2},
		Labels: map[string]string{
			"afe.ticket": "tk-1", "afe.namespace": "team", "afe.sandbox": "tk-1", "afe.sandbox-uid": "uid-1",
			"afe.scope": "main", "afe.role": "sandbox", "afe.controller": "default", "afe.spec-hash": hash,
		},
	}
	// The image's VOLUME paths get volumes named after the sandbox,
	// labelled as its own.
	if iv := got.ImageVolumes; iv == nil || iv.Name("/data") != naming.ImageVolume(id.Key, "/data") ||
		!cmp.Equal(iv.Labels, id.Labels(afev1.RoleImageVolume)) {
		t.Fatalf("image volumes: %+v", iv)
	}
	got.ImageVolumes = nil
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}

	// A command of its own gets no stdin, and its hash is computed as
	// before stdin could be kept open: no drift on upgrade.
	sbx.Spec.Command = []string{"/bin/sh", "-c", "exec my-agent"}
	own := Container(sbx, id, Resolved{Env: []string{"A=1"}, Workspace: "afe-team.tk-1-ws"})
	if own.OpenStdin {
		t.Fatal("a sandbox with its own command got an open stdin")
	}
	if b, _ := json.Marshal(own); strings.Contains(string(b), "OpenStdin") {
		t.Fatalf("the hashed JSON of a spec without stdin names it: %s", b)
	}

	// The labels a recreated volume would get follow the identity, not the
	// spec: they are not hashed (nor do they recreate anything on upgrade).
	unlabelled := got
	unlabelled.Mounts = []enginespec.Mount{got.Mounts[0]}
	unlabelled.Mounts[0].Labels = nil
	if Hash(unlabelled) != Hash(got) {
		t.Fatal("the mount's labels change the spec hash")
	}
	if got.Mounts[0].Labels == nil {
		t.Fatal("Hash changed the mounts of the spec it was given")
	}
}

func TestHashTracksTheSpec(t *testing.T) {
	base := testSandbox()
	id := IdentityOf(base, "default")
	r := Resolved{Workspace: "v"}
	h0 := Container(base, id, r).Labels[afev1.LabelSpecHash]
	if h := Container(testSandbox(), id, r).Labels[afev1.LabelSpecHash]; h != h0 {
		t.Fatal("hash is not stable")
	}
	tests := map[string]struct {
		// change alters the sandbox, what was resolved for it, or the
		// controller instance.
		change func(s *afev1.Sandbox, r *Resolved, instance *string)
		same   bool
	}{
		"image":   {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) { s.Spec.Image = "other:1" }},
		"command": {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) { s.Spec.Command = []string{"sleep", "1"} }},
		"memory": {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) {
			s.Spec.Resources.Memory = ptr.To(resource.MustParse("2Gi"))
		}},
		"user": {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) { s.Spec.User = "1001" }},
		// Given to each exec, not held by the container (ContainerEnv):
		// the next exec gets the new value.
		"env":     {change: func(_ *afev1.Sandbox, r *Resolved, _ *string) { r.Env = []string{"A=2"} }, same: true},
		"network": {change: func(_ *afev1.Sandbox, r *Resolved, _ *string) { r.Network = "afe-x-net" }},
		"ws":      {change: func(_ *afev1.Sandbox, r *Resolved, _ *string) { r.Workspace = "w" }},
		"runtime": {change: func(_ *afev1.Sandbox, r *Resolved, _ *string) {
			r.Runtime = enginespec.Runtime{Name: "runsc", Path: "/usr/bin/runsc"}
		}},
		// runc named is what every container ran under before runtimes
		// were chosen: its containers are kept.
		"runc named": {change: func(_ *afev1.Sandbox, r *Resolved, _ *string) {
			r.Runtime = enginespec.Runtime{Name: "runc", Path: "runc"}
		}, same: true},
		// A label, not part of the container's behaviour.
		"ticket": {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) {
			s.Spec.TicketRef = &afev1.TicketReference{Name: "other"}
		}, same: true},
		// Runs' default only: no container change.
		"timeout": {change: func(s *afev1.Sandbox, _ *Resolved, _ *string) { s.Spec.TimeoutSeconds = 5 }, same: true},
		// The afe.controller label; another instance never adopts the
		// container anyway (Owns checks the label).
		"instance": {change: func(_ *afev1.Sandbox, _ *Resolved, instance *string) { *instance = "other" }, same: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, rr, instance := testSandbox(), r, "default"
			tc.change(s, &rr, &instance)
			c := Container(s, IdentityOf(s, instance), rr)
			if name == "instance" && c.Labels[afev1.LabelController] != "other" {
				t.Fatalf("the instance was not changed: %v", c.Labels)
			}
			if same := c.Labels[afev1.LabelSpecHash] == h0; same != tc.same {
				t.Fatalf("hash unchanged = %v, want %v", same, tc.same)
			}
		})
	}
}

func TestFolderWorkspaceIsABindMountWithoutChown(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/ws/tk"}
	got := Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "/srv/ws/tk"}).Mounts
	want := []enginespec.Mount{{Type: enginespec.MountBind, Source: "/srv/ws/tk", Target: "/workspace"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestProxyIsHardened(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Egress = []afev1.EgressHost{"example.com", ".pypi.org"}
	id := IdentityOf(sbx, "default")
	opts := ProxyOptions{Image: "afe/egress-proxy:dev", EgressNetwork: "bridge", DenyIPs: []string{"172.17.0.1"}}
	allow, err := ProxyAllowlist(sbx, opts)
	must(t, err)
	got := Proxy(sbx, id, opts, allow)
	want := enginespec.ContainerSpec{
		Name:       "afe-team.tk-1_proxy",
		Image:      "afe/egress-proxy:dev",
		Entrypoint: []string{"/usr/local/bin/afe-egress-squid"},
		User:       "proxy",
		// The allowlist it was created with (the contract's, for
		// operators), and squid's configuration rendered from it.
		Env: []string{
			"AFE_EGRESS_HOSTS=example.com,.pypi.org",
			"AFE_EGRESS_CONFIG=" + allow.Text,
		},
		Network:         "afe-team.tk-1_net",
		Aliases:         []string{"afe-proxy"},
		ExtraNetworks:   []string{"bridge"},
		NanoCPUs:        500_000_000,
		MemoryBytes:     256 << 20,
		PidsLimit:       128,
		Runtime:         "runc",
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		ReadOnlyRootfs:  true,
		Tmpfs:           map[string]string{"/tmp": "rw,noexec,nosuid,size=16m"},
		Init:            true,
		OpenStdin:       true,
		Log:             &enginespec.LogConfig{MaxFileBytes: 2 << 20, Files: 2},
		Labels: map[string]string{
			"afe.ticket": "tk-1", "afe.namespace": "team", "afe.sandbox": "tk-1", "afe.sandbox-uid": "uid-1",
			"afe.scope": "main", "afe.role": "proxy", "afe.controller": "default", "afe.allowlist": allow.ID,
		},
	}
	hash := got.Labels[afev1.LabelSpecHash]
	want.Labels[afev1.LabelSpecHash] = hash
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if again, _ := ProxyAllowlist(sbx, opts); again.ID != allow.ID {
		t.Fatal("the allowlist's ID is not stable")
	}
	if !strings.Contains(allow.Text, "\nacl afe_allowed dstdomain -n .pypi.org\n") || !strings.Contains(allow.Text, "\nacl afe_host dst 172.17.0.1\n") {
		t.Fatalf("the configuration does not render the policy:\n%s", allow.Text)
	}
}

// An allowlist changes in place: the proxy's spec-hash leaves out the
// hosts, the private flag and the host's addresses, and the allowlist's ID
// follows each of them.
func TestProxyAllowlistChangesInPlace(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Egress = []afev1.EgressHost{"example.com"}
	id := IdentityOf(sbx, "default")
	base := ProxyOptions{Image: "afe/egress-proxy:dev", EgressNetwork: "bridge", DenyIPs: []string{"172.17.0.1"}}
	proxy := func(sbx *afev1.Sandbox, opts ProxyOptions) (hash, allowID string) {
		allow, err := ProxyAllowlist(sbx, opts)
		must(t, err)
		c := Proxy(sbx, id, opts, allow)
		return c.Labels[afev1.LabelSpecHash], allow.ID
	}
	hash, allowID := proxy(sbx, base)
	more := sbx.DeepCopy()
	more.Spec.Egress = append(more.Spec.Egress, "other.org")
	private := base
	private.AllowPrivate = true
	deny := base
	deny.DenyIPs = []string{"172.17.0.1", "172.19.0.1"}
	for name, tc := range map[string]struct {
		sbx  *afev1.Sandbox
		opts ProxyOptions
	}{
		"another host":         {more, base},
		"private destinations": {sbx, private},
		"another host address": {sbx, deny},
	} {
		t.Run(name, func(t *testing.T) {
			h, a := proxy(tc.sbx, tc.opts)
			if h != hash {
				t.Error("the change recreates the proxy (its spec-hash changed)")
			}
			if a == allowID {
				t.Error("the allowlist's ID did not change")
			}
		})
	}
	if h, _ := proxy(sbx, ProxyOptions{Image: "other", EgressNetwork: "bridge"}); h == hash {
		t.Error("another image must change the proxy's spec-hash")
	}
}

func TestSandboxWithEgressKeepsItsContainerWhenTheAllowlistChanges(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Egress = []afev1.EgressHost{"example.com"}
	id := IdentityOf(sbx, "default")
	r := Resolved{Workspace: "v", Network: "afe-team.tk-1-net", ProxyEnv: ProxyEnvFor()}
	c := Container(sbx, id, r)
	if c.Network != "afe-team.tk-1-net" || len(c.DNS) != 1 || c.DNS[0] != "127.0.0.1" {
		t.Fatalf("network %q dns %v", c.Network, c.DNS)
	}
	if d := cmp.Diff([]string{
		"HTTP_PROXY=http://afe-proxy:3128", "HTTPS_PROXY=http://afe-proxy:3128",
		"http_proxy=http://afe-proxy:3128", "https_proxy=http://afe-proxy:3128",
	}, c.Env); d != "" {
		t.Fatal(d)
	}
	sbx.Spec.Egress = []afev1.EgressHost{"example.com", "other.org"}
	if Container(sbx, id, r).Labels[afev1.LabelSpecHash] != c.Labels[afev1.LabelSpecHash] {
		t.Fatal("changing the allowlist must not recreate the sandbox container")
	}
	if none := Container(testSandbox(), id, Resolved{Workspace: "v"}); none.Network != "none" || none.DNS != nil {
		t.Fatalf("no egress: network %q dns %v", none.Network, none.DNS)
	}
}

// The CRD's pattern for egress entries is the one the controller checks
// (the renderer of the proxy's configuration, which checks names by hand,
// is held to the controller by internal/egress's
// FuzzParseHostAgreesWithAdmission).
func TestCRDEgressPatternMatchesTheController(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "sandbox.afe.dev_sandboxes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(crd), "pattern: "+EgressHostPattern+"\n") {
		t.Fatalf("the CRD does not use EgressHostPattern %s", EgressHostPattern)
	}
}

func TestFileSizeAndOpenFilesBecomeUlimits(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Resources.FileSize = ptr.To(resource.MustParse("1Gi"))
	sbx.Spec.Resources.OpenFiles = 4096
	got := Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v"}).Ulimits
	want := []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, {Name: "nofile", Soft: 4096, Hard: 4096}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func controllerEnv(name, from string) []afev1.EnvVar {
	return []afev1.EnvVar{{Name: name, ValueFrom: &afev1.EnvVarSource{ControllerEnv: from}}}
}

func secretEnv(name, key string) []afev1.EnvVar {
	return []afev1.EnvVar{{Name: "T", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: name, Key: key}}}}
}

// The allowlist refuses what the renderer refuses, whatever admission
// did: an entry that is not a host name, a denied address that is not one.
func TestProxyAllowlistRefusesWhatIsNotAName(t *testing.T) {
	for name, tc := range map[string]struct {
		egress []afev1.EgressHost
		deny   []string
	}{
		"injected directive": {egress: []afev1.EgressHost{"a.com\nhttp_access allow all"}},
		"space":              {egress: []afev1.EgressHost{"a.com all"}},
		"twice":              {egress: []afev1.EgressHost{"a.com", "a.com"}},
		"denied address":     {egress: []afev1.EgressHost{"a.com"}, deny: []string{"1.2.3.4 all"}},
	} {
		t.Run(name, func(t *testing.T) {
			sbx := testSandbox()
			sbx.Spec.Egress = tc.egress
			if allow, err := ProxyAllowlist(sbx, ProxyOptions{DenyIPs: tc.deny}); err == nil {
				t.Fatalf("rendered:\n%s", allow.Text)
			}
		})
	}
	none, err := NoHosts(ProxyOptions{})
	must(t, err)
	if !strings.Contains(none.Text, "\nhttp_access deny all afe_why_nothing\n") {
		t.Fatalf("an empty allowlist admits something:\n%s", none.Text)
	}
}

// A sandbox with egress finds its proxy by the name its /etc/hosts gives
// the proxy's address, not by the engine's DNS (which gVisor's network
// stack does not reach); a sandbox without egress has no such line, and
// its hash is the one it always was.
func TestContainerNamesItsProxyInEtcHosts(t *testing.T) {
	sbx := testSandbox()
	id := IdentityOf(sbx, "default")
	egress := Container(sbx, id, Resolved{Workspace: "w", Network: "afe-team.tk-1_net", ProxyEnv: ProxyEnvFor(), ProxyAddress: "198.18.0.10"})
	if d := cmp.Diff([]string{"afe-proxy:198.18.0.10"}, egress.ExtraHosts); d != "" {
		t.Errorf("ExtraHosts (-want +got):\n%s", d)
	}
	moved := Container(sbx, id, Resolved{Workspace: "w", Network: "afe-team.tk-1_net", ProxyEnv: ProxyEnvFor(), ProxyAddress: "198.18.0.18"})
	if moved.Labels[afev1.LabelSpecHash] == egress.Labels[afev1.LabelSpecHash] {
		t.Error("the proxy's address is not in the container's hash: a proxy made again elsewhere would leave a stale /etc/hosts")
	}
	none := Container(sbx, id, Resolved{Workspace: "w"})
	if none.ExtraHosts != nil {
		t.Errorf("a sandbox without egress: ExtraHosts %v", none.ExtraHosts)
	}
	b, _ := json.Marshal(none)
	if strings.Contains(string(b), "ExtraHosts") {
		t.Error("ExtraHosts is hashed for a sandbox without it: every container would drift on upgrade")
	}
}

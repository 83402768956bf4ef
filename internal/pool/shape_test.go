package pool

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/sandboxspec"
)

// template is a pool's or sandbox's template as the CRD defaults it.
func template() afev1.SandboxTemplateSpec {
	return afev1.SandboxTemplateSpec{
		Image:          "afe/busybox:dev",
		TimeoutSeconds: 600,
		Resources:      afev1.SandboxResources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("1Gi")), Pids: 512},
		Workspace:      afev1.WorkspaceSpec{Type: afev1.WorkspaceVolume},
	}
}

// resolvedEnv is the env a template's sandbox has in its container:
// only with a command (otherwise it is given to each exec).
func resolvedEnv(t afev1.SandboxTemplateSpec) []string {
	if len(t.Command) == 0 {
		return nil
	}
	var env []string
	for _, e := range t.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return env
}

var shapeOpts = sandboxspec.Options{DefaultRuntime: "runc"}

func shapeOf(t afev1.SandboxTemplateSpec) Shape {
	return ShapeOf(&t, shapeOpts, resolvedEnv(t), afev1.DiskStorageQuota)
}

// sandboxContainer is the container a sandbox of a template gets, as the
// Sandbox reconciler makes it, without the function of its image volumes
// (which cmp cannot compare; the names it gives follow the identity).
func sandboxContainer(t afev1.SandboxTemplateSpec) enginespec.ContainerSpec {
	sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: t}}
	sbx.Namespace, sbx.Name, sbx.UID = "team", "tk-1", "uid-1"
	id := sandboxspec.IdentityOf(sbx, "default")
	r := sandboxspec.Resolved{Env: resolvedEnv(t), Workspace: "afe-team.tk-1_ws", User: "200000:200000",
		Runtime: enginespec.Runtime{Name: sandboxspec.RuntimeOf(&t, shapeOpts)}}
	if len(t.Egress) > 0 {
		r.Network, r.ProxyEnv = "afe-team.tk-1_net", sandboxspec.ProxyEnvFor()
	}
	c := sandboxspec.Container(sbx, id, r)
	c.ImageVolumes = nil
	return c
}

func TestShape(t *testing.T) {
	with := func(edit func(*afev1.SandboxTemplateSpec)) afev1.SandboxTemplateSpec {
		tpl := template()
		edit(&tpl)
		return tpl
	}
	env := []afev1.EnvVar{{Name: "TOKEN", Value: "a"}}
	tests := map[string]struct {
		pool, sandbox afev1.SandboxTemplateSpec
		differs       string
	}{
		"the same":                {template(), template(), ""},
		"other egress hosts":      {with(func(t *afev1.SandboxTemplateSpec) { t.Egress = []afev1.EgressHost{"a.example.com"} }), with(func(t *afev1.SandboxTemplateSpec) { t.Egress = []afev1.EgressHost{"b.example.com"} }), ""},
		"another timeout":         {template(), with(func(t *afev1.SandboxTemplateSpec) { t.TimeoutSeconds = 60 }), ""},
		"env without a command":   {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Env = env }), ""},
		"a poolRef":               {template(), with(func(t *afev1.SandboxTemplateSpec) { t.PoolRef = &afev1.PoolReference{Name: "p"} }), ""},
		"default runtime named":   {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Runtime = "runc" }), ""},
		"default limits unset":    {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.CPU, t.Resources.Memory = nil, nil }), ""},
		"cpu in other units":      {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.CPU = ptr.To(resource.MustParse("1000m")) }), ""},
		"workspace type unset":    {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Workspace.Type = "" }), ""},
		"user unset in both":      {template(), template(), ""},
		"same command and env":    {with(func(t *afev1.SandboxTemplateSpec) { t.Command, t.Env = []string{"sleep", "1d"}, env }), with(func(t *afev1.SandboxTemplateSpec) { t.Command, t.Env = []string{"sleep", "1d"}, env }), ""},
		"image":                   {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Image = "afe/other:dev" }), "image differs"},
		"command":                 {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Command = []string{"sleep", "1d"} }), "command differs"},
		"env with a command":      {with(func(t *afev1.SandboxTemplateSpec) { t.Command = []string{"sleep", "1d"} }), with(func(t *afev1.SandboxTemplateSpec) { t.Command, t.Env = []string{"sleep", "1d"}, env }), "env differs (a sandbox with a command has its env in the container)"},
		"user named":              {template(), with(func(t *afev1.SandboxTemplateSpec) { t.User = "1000:1000" }), "user differs"},
		"memory":                  {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Memory = ptr.To(resource.MustParse("2Gi")) }), "resources differ"},
		"disk":                    {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Disk = ptr.To(resource.MustParse("1Gi")) }), "resources.disk differs"},
		"another disk limit":      {with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Disk = ptr.To(resource.MustParse("2Gi")) }), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Disk = ptr.To(resource.MustParse("1Gi")) }), "resources.disk differs"},
		"same disk, other units":  {with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Disk = ptr.To(resource.MustParse("1Gi")) }), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Disk = ptr.To(resource.MustParse("1024Mi")) }), ""},
		"pids":                    {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Resources.Pids = 64 }), "resources differ"},
		"runtime":                 {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Runtime = "runsc" }), "runtime differs"},
		"lifecycle":               {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Lifecycle = &afev1.SandboxLifecycle{IdleTimeoutSeconds: 60} }), "lifecycle differs"},
		"folder workspace":        {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder} }), "workspace type differs"},
		"egress only in sandbox":  {template(), with(func(t *afev1.SandboxTemplateSpec) { t.Egress = []afev1.EgressHost{"example.com"} }), "the sandbox declares egress and the pool does not"},
		"egress only in the pool": {with(func(t *afev1.SandboxTemplateSpec) { t.Egress = []afev1.EgressHost{"example.com"} }), template(), "the pool declares egress and the sandbox does not"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool, sbx := shapeOf(tc.pool), shapeOf(tc.sandbox)
			if diff := cmp.Diff(tc.differs, pool.Differs(sbx)); diff != "" {
				t.Fatalf("Differs (-want +got):\n%s", diff)
			}
			if (pool == sbx) != (tc.differs == "") || (pool.Hash() == sbx.Hash()) != (pool == sbx) {
				t.Fatalf("equal shapes %v, equal hashes %v, differs %q", pool == sbx, pool.Hash() == sbx.Hash(), tc.differs)
			}
			if tc.differs != "" {
				return
			}
			// Equal shapes: the sandbox gets the very same container, and so
			// the same spec-hash, from either template.
			a, b := sandboxContainer(tc.pool), sandboxContainer(tc.sandbox)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Fatalf("equal shapes, other containers (-pool +sandbox):\n%s", diff)
			}
			if sandboxspec.Hash(a) != sandboxspec.Hash(b) {
				t.Fatal("equal shapes, other spec-hashes")
			}
		})
	}
}

// Whatever a sandbox's identity, its volume, network and allocated user,
// the shape of its template is the same: it names nothing of the sandbox.
func TestShapeNamesNoIdentity(t *testing.T) {
	tpl := template()
	tpl.Egress = []afev1.EgressHost{"example.com"}
	a := ShapeOf(&tpl, shapeOpts, nil, "")
	tpl.Egress = []afev1.EgressHost{"other.example.com", ".example.org"}
	if b := ShapeOf(&tpl, sandboxspec.Options{}, nil, afev1.DiskReadOnlyRoot); a != b {
		t.Fatalf("the shape follows the allowlist or the options' spelling of runc:\n%s", cmp.Diff(a, b))
	}
	if len(a.Hash()) != 20 {
		t.Fatalf("Hash %q", a.Hash())
	}
}

// A disk limit is one shape per enforcement: a member made under the
// engine's storage quota serves no sandbox that would be made with a
// read-only root, and the reverse; without a limit the enforcement counts
// for nothing, and the hash is what it was before disk limits were pooled.
func TestShapeDiskEnforcement(t *testing.T) {
	tpl := template()
	if a, b := ShapeOf(&tpl, shapeOpts, nil, afev1.DiskStorageQuota), ShapeOf(&tpl, shapeOpts, nil, afev1.DiskReadOnlyRoot); a != b {
		t.Fatalf("without a disk limit the enforcement counts:\n%s", cmp.Diff(a, b))
	}
	if a := ShapeOf(&tpl, shapeOpts, nil, ""); strings.Contains(encode(a), "Disk") {
		t.Fatalf("a shape without a disk limit encodes its fields: %s", encode(a))
	}
	tpl.Resources.Disk = ptr.To(resource.MustParse("64Mi"))
	quota, ro := ShapeOf(&tpl, shapeOpts, nil, afev1.DiskStorageQuota), ShapeOf(&tpl, shapeOpts, nil, afev1.DiskReadOnlyRoot)
	if got := quota.Differs(ro); got != "the disk limit's enforcement differs" {
		t.Fatalf("Differs = %q", got)
	}
	if quota.Hash() == ro.Hash() || quota.Container == ro.Container {
		t.Fatal("the enforcement leaves the hash or the container's hash alike")
	}
	if quota.Disk != fmt.Sprint(64<<20) {
		t.Fatalf("Disk = %q", quota.Disk)
	}
}

// Package sandboxspec turns a Sandbox into the Docker objects it needs. It is
// pure: validation, names, labels, the hardened container spec and its hash.
// The API server validates the same rules at admission; the controller checks
// them again here so that nothing invalid reaches Docker, whatever the CRD.
package sandboxspec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// DefaultDenyEnv are env names never allowed into a sandbox: they would hand
// it the engine, the cluster or a forge.
var DefaultDenyEnv = []string{
	"DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_CONFIG", "DOCKER_CONTEXT",
	"KUBECONFIG", "GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "FORGE_TOKEN",
}

// ProxyEnv are set by the controller for sandboxes with egress and cannot be
// declared.
var ProxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"}

// EgressHostPattern is the pattern of an egress entry; the CRD's pattern and
// the proxy image's entrypoint use the same one.
const EgressHostPattern = `^\.?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`

var (
	egressHost = regexp.MustCompile(EgressHostPattern)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userRe     = regexp.MustCompile(`^([0-9]{1,10})(?::([0-9]{1,10}))?$`)
	// runtimeName is the CRD's pattern of spec.runtime.
	runtimeName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
)

// InvalidError says why a spec cannot be honoured and carries the condition
// reason to report.
type InvalidError struct {
	Reason  string
	Message string
}

func (e *InvalidError) Error() string { return e.Message }

// invalid makes an InvalidError; its message, a condition message, starts
// with a capital.
func invalid(reason, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return &InvalidError{Reason: reason, Message: msg}
}

// AsInvalid returns the InvalidError in err, if any.
func AsInvalid(err error) (*InvalidError, bool) {
	var ie *InvalidError
	ok := errors.As(err, &ie)
	return ie, ok
}

// Options are the controller's settings that validation depends on.
type Options struct {
	// WorkspaceRoot is --workspace-root; empty refuses Folder workspaces.
	WorkspaceRoot string
	// DenyEnv are refused env names, besides DefaultDenyEnv.
	DenyEnv []string
	// DenyGIDs are gids a sandbox's user may not have: the group of the
	// engine's socket, the host's privileged groups and --deny-gids.
	DenyGIDs []int
	// AllowedUIDs and AllowedGIDs are --allowed-uids and --allowed-gids;
	// empty allows any (root, DenyGIDs and the Run groups aside).
	AllowedUIDs IDRanges
	AllowedGIDs IDRanges
	// SandboxIDs is --sandbox-id-range: the ids allocated to sandboxes
	// without spec.user, which no spec.user may name. Zero is
	// DefaultSandboxIDs.
	SandboxIDs IDRange
	// EngineRemote is true when the Docker engine is not reached through a
	// local unix socket: Folder workspaces are then refused unless
	// WorkspaceRootShared.
	EngineRemote bool
	// WorkspaceRootShared is --workspace-root-shared: the engine sees
	// WorkspaceRoot at the same path as the controller.
	WorkspaceRootShared bool
	// WorkspaceRootAllowSuid is --workspace-root-allow-suid: Folder
	// workspaces are allowed on a file system not mounted nosuid,nodev.
	WorkspaceRootAllowSuid bool
	// Passthrough are the names of --env-passthrough: true when the
	// controller's environment has the variable, false when it does not.
	Passthrough map[string]bool
	// Runtimes is --runtimes: the OCI runtimes a sandbox may name (empty:
	// DefaultRuntime); DefaultRuntime is --default-runtime.
	Runtimes       []string
	DefaultRuntime string
}

// Validate checks a sandbox spec.
func Validate(spec *afev1.SandboxTemplateSpec, opts Options) error {
	if strings.TrimSpace(spec.Image) == "" || strings.ContainsAny(spec.Image, " \t\n\r") {
		return invalid(afev1.InvalidSpecReason, "Image %q is not a valid image reference", spec.Image)
	}
	if spec.Runtime != "" && !runtimeName.MatchString(spec.Runtime) {
		return invalid(afev1.InvalidSpecReason, "Runtime %q is not a runtime name", spec.Runtime)
	}
	if err := validateRuntime(spec, opts); err != nil {
		return err
	}
	if spec.User != "" { // unset: the controller allocates one
		if _, _, err := ValidateUser(spec.User, opts); err != nil {
			return err
		}
	}
	if err := ValidateEgress(spec.Egress); err != nil {
		return invalid(afev1.InvalidSpecReason, "%v", err)
	}
	if err := validateEnv(spec.Env, opts.DenyEnv, opts.Passthrough); err != nil {
		return err
	}
	if cpu := spec.Resources.CPUOrDefault(); cpu.MilliValue() < 10 {
		return invalid(afev1.InvalidSpecReason, "Resources.cpu must be at least 10m")
	}
	if mem := spec.Resources.MemoryOrDefault(); mem.Value() < 16<<20 {
		return invalid(afev1.InvalidSpecReason, "Resources.memory must be at least 16Mi")
	}
	if spec.Resources.Pids < 16 {
		return invalid(afev1.InvalidSpecReason, "Resources.pids must be at least 16")
	}
	if fs := spec.Resources.FileSizeOrDefault(); fs.Value() < 1<<20 {
		return invalid(afev1.InvalidSpecReason, "Resources.fileSize must be at least 1Mi")
	}
	if n := spec.Resources.OpenFiles; n != 0 && (n < 64 || n > 1<<20) {
		return invalid(afev1.InvalidSpecReason, "Resources.openFiles must be between 64 and 1048576")
	}
	if spec.Resources.Disk != nil && spec.Workspace.Type == afev1.WorkspaceFolder {
		return invalid(afev1.InvalidSpecReason, "Resources.disk is not enforced on a Folder workspace; use a Volume workspace")
	}
	switch spec.Workspace.Type {
	case afev1.WorkspaceVolume, "":
		if spec.Workspace.HostPath != "" {
			return invalid(afev1.InvalidSpecReason, "Workspace.hostPath is only allowed for a Folder workspace")
		}
	case afev1.WorkspaceFolder:
		if _, _, err := FolderPath(spec.Workspace.HostPath, opts); err != nil {
			return err
		}
	default:
		return invalid(afev1.InvalidSpecReason, "Workspace.type %q is not Volume or Folder", spec.Workspace.Type)
	}
	return nil
}

// ParseUser parses a numeric "uid" or "uid:gid"; root (uid or gid 0) and names
// are refused. A missing gid is the uid.
func ParseUser(user string) (uid, gid int, err error) {
	m := userRe.FindStringSubmatch(user)
	if m == nil {
		return 0, 0, fmt.Errorf("user %q must be a numeric uid or uid:gid; names are refused because an image could map them to root", user)
	}
	uid, err = strconv.Atoi(m[1])
	if err != nil || uid <= 0 || uid > 1<<31-2 {
		return 0, 0, fmt.Errorf("user %q: uid must be between 1 and 2147483646 (root is refused)", user)
	}
	gid = uid
	if m[2] != "" {
		gid, err = strconv.Atoi(m[2])
		if err != nil || gid <= 0 || gid > 1<<31-2 {
			return 0, 0, fmt.Errorf("user %q: gid must be between 1 and 2147483646 (root's group is refused)", user)
		}
	}
	return uid, gid, nil
}

// The bounds of an egress allowlist, the CRD's (MaxItems, MaxLength) and
// the proxy's entrypoint's: the largest allowlist admitted is the one
// docker/egress-proxy's tests render and start a proxy with.
const (
	// MaxEgressHosts is how many entries an allowlist may have.
	MaxEgressHosts = 64
	// MaxEgressHostLength is the longest entry, in characters.
	MaxEgressHostLength = 253
)

// ValidateEgress checks an egress allowlist: host names or leading-dot
// domains, at most MaxEgressHosts, no duplicates.
func ValidateEgress(hosts []afev1.EgressHost) error {
	if len(hosts) > MaxEgressHosts {
		return fmt.Errorf("egress lists %d hosts; at most %d are allowed", len(hosts), MaxEgressHosts)
	}
	seen := map[afev1.EgressHost]bool{}
	for _, h := range hosts {
		if err := ValidateEgressHost(string(h)); err != nil {
			return err
		}
		if seen[h] {
			return fmt.Errorf("egress lists %q twice", h)
		}
		seen[h] = true
	}
	return nil
}

// ValidateEgressHost checks one egress entry.
func ValidateEgressHost(h string) error {
	if len(h) < 4 || len(h) > MaxEgressHostLength || !egressHost.MatchString(h) {
		return fmt.Errorf("egress entry %q is not a lower-case host name or .domain (IP literals, wildcards, ports, schemes and spaces are refused)", h)
	}
	return nil
}

// PassthroughSet is --env-passthrough as validation takes it (Options.
// Passthrough): each listed name, and whether it is set in the
// controller's environment.
func PassthroughSet(values map[string]*string) map[string]bool {
	set := make(map[string]bool, len(values))
	for name, v := range values {
		set[name] = v != nil
	}
	return set
}

// ValidateEnv checks a declared env as Validate does: valid names, none on
// the deny list (DefaultDenyEnv and extraDeny) nor set for the proxy, none
// twice, one source each, and a controllerEnv only of a name passthrough
// holds (true: set in the controller's environment).
func ValidateEnv(env []afev1.EnvVar, extraDeny []string, passthrough map[string]bool) error {
	return validateEnv(env, extraDeny, passthrough)
}

func validateEnv(env []afev1.EnvVar, extraDeny []string, passthrough map[string]bool) error {
	deny := map[string]bool{}
	for _, n := range append(append([]string{}, DefaultDenyEnv...), extraDeny...) {
		deny[strings.ToUpper(n)] = true
	}
	reserved := map[string]bool{}
	for _, n := range ProxyEnv {
		reserved[n] = true
	}
	seen := map[string]bool{}
	for _, e := range env {
		if !envName.MatchString(e.Name) || len(e.Name) > 128 {
			return invalid(afev1.InvalidSpecReason, "Env name %q is not a valid variable name", e.Name)
		}
		if deny[strings.ToUpper(e.Name)] {
			return invalid(afev1.DeniedEnvReason, "Env %s is on the controller's deny list and cannot enter a sandbox", e.Name)
		}
		if reserved[e.Name] {
			return invalid(afev1.InvalidSpecReason, "Env %s is set by the controller for the egress proxy and cannot be declared", e.Name)
		}
		if seen[e.Name] {
			return invalid(afev1.InvalidSpecReason, "Env %s is declared twice", e.Name)
		}
		seen[e.Name] = true
		if e.ValueFrom != nil && e.Value != "" {
			return invalid(afev1.InvalidSpecReason, "Env %s sets both value and valueFrom", e.Name)
		}
		if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil) == (e.ValueFrom.ControllerEnv != "") {
			return invalid(afev1.InvalidSpecReason, "Env %s: valueFrom sets one of secretKeyRef and controllerEnv", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.ControllerEnv != "" {
			if err := validateControllerEnv(e, deny, passthrough); err != nil {
				return err
			}
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
				return invalid(afev1.InvalidSpecReason, "Env %s: %q is not a Secret name of the Sandbox's namespace: %s", e.Name, ref.Name, strings.Join(errs, "; "))
			}
			if errs := validation.IsConfigMapKey(ref.Key); len(errs) > 0 {
				return invalid(afev1.InvalidSpecReason, "Env %s: %q is not a Secret key: %s", e.Name, ref.Key, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// validateControllerEnv refuses a controllerEnv the operator does not pass
// through, or one the deny list names (the deny list wins over
// --env-passthrough).
func validateControllerEnv(e afev1.EnvVar, deny, passthrough map[string]bool) error {
	from := e.ValueFrom.ControllerEnv
	if !envName.MatchString(from) || len(from) > 128 {
		return invalid(afev1.InvalidSpecReason, "Env %s: controllerEnv %q is not a valid variable name", e.Name, from)
	}
	if deny[strings.ToUpper(from)] {
		return invalid(afev1.DeniedEnvReason, "Env %s: the controller's %s is on its deny list and cannot enter a sandbox", e.Name, from)
	}
	set, listed := passthrough[from]
	if !listed {
		return invalid(afev1.ControllerEnvNotAllowedReason,
			"Env %s: the controller's %s is not on its --env-passthrough list; only the variables listed there can enter a sandbox", e.Name, from)
	}
	if !set {
		return invalid(afev1.ControllerEnvNotAllowedReason,
			"Env %s: %s is on the controller's --env-passthrough list but not set in its environment", e.Name, from)
	}
	return nil
}

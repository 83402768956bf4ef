// Package folders finds what may not exist beside a Folder workspace:
// another Sandbox's folder that is the same, or nested in it or around it,
// of another ticket, or a container that still has such a folder mounted.
// The Sandbox reconciler waits on it before a container mounts a folder,
// the Run reconciler before a snapshot of one.
package folders

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Conflict is a Sandbox, or a container, whose folder may not exist
// beside the one checked.
type Conflict struct {
	// sandbox is the other Sandbox's name.
	sandbox string
	// Container is set when the conflict is a container that still has the
	// folder mounted, not a Sandbox's spec: the leftover of a spec changed
	// since, or of an earlier version of the controller.
	Container string
	path      string
	same      bool
}

// Message is the condition message: it names the other Sandbox.
func (c *Conflict) Message(path string) string {
	switch {
	case c.Container != "":
		return fmt.Sprintf("Container %s of Sandbox %s still has %s mounted, which overlaps folder %s; waiting for it to go", c.Container, c.sandbox, c.path, path)
	case c.same:
		return fmt.Sprintf("Folder %s is also the workspace of Sandbox %s, of another ticket; only Sandboxes of one ticket may share a folder", path, c.sandbox)
	default:
		return fmt.Sprintf("Folder %s and folder %s of Sandbox %s are nested; Folder workspaces may not contain one another", path, c.path, c.sandbox)
	}
}

// FindConflict looks for what may not exist beside sbx having the
// folder path: another Sandbox of the namespace whose folder conflicts
// (being deleted or not), then a container of another Sandbox, of any
// namespace, with such a folder mounted.
func FindConflict(ctx context.Context, reader client.Reader, engine identity.ContainerLister, opts config.Config, sbx *afev1.Sandbox, path string) (*Conflict, error) {
	ticket := sandboxspec.IdentityOf(sbx, opts.Instance).Ticket
	list := &afev1.SandboxList{}
	if err := reader.List(ctx, list, client.InNamespace(sbx.Namespace)); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == sbx.UID || other.Spec.Workspace.Type != afev1.WorkspaceFolder {
			continue
		}
		p, _, err := sandboxspec.FolderPath(other.Spec.Workspace.HostPath, opts.Workspaces())
		if err != nil {
			continue // refused by itself: it gets no container
		}
		if sandboxspec.FoldersConflict(path, ticket, p, sandboxspec.IdentityOf(other, opts.Instance).Ticket) {
			return &Conflict{sandbox: other.Name, path: p, same: p == path}, nil
		}
	}
	containers, err := engine.ListContainers(ctx, map[string]string{afev1.LabelRole: afev1.RoleSandbox})
	if err != nil {
		return nil, err
	}
	sort.Slice(containers, func(i, j int) bool { return containers[i].Name < containers[j].Name })
	for _, c := range containers {
		if c.Labels[afev1.LabelSandboxUID] == string(sbx.UID) {
			continue
		}
		for _, m := range c.Mounts {
			if m.Type == docker.MountBind && sandboxspec.FoldersConflict(path, ticket, m.Source, c.Labels[afev1.LabelTicket]) {
				return &Conflict{sandbox: c.Labels[afev1.LabelNamespace] + "/" + c.Labels[afev1.LabelSandbox],
					Container: c.Name, path: m.Source, same: m.Source == path}, nil
			}
		}
	}
	return nil, nil
}

package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

// Exec and files reach the container whose name is derived from the
// Sandbox and whose labels name that Sandbox (UID, namespace, name), the
// sandbox role and the controller's instance, by its ID. Every case also
// forges status.containerName and containerID towards a running container
// that is right in every label: the access API must never go there.
func TestContainerFor(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	const instance = "access-target-test"
	run := fmt.Sprintf("target-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { dockertest.RemoveAll("afe.test=" + run) })
	ns := "access-" + run

	// rightLabels are the labels the controller of instance gives the
	// sandbox container of sbx.
	rightLabels := func(sbx *afev1.Sandbox) map[string]string {
		return map[string]string{
			afev1.LabelTicket:     sbx.Name,
			afev1.LabelNamespace:  sbx.Namespace,
			afev1.LabelSandbox:    sbx.Name,
			afev1.LabelSandboxUID: string(sbx.UID),
			afev1.LabelScope:      "main",
			afev1.LabelRole:       afev1.RoleSandbox,
			afev1.LabelController: instance,
			"afe.test":            run,
		}
	}
	tests := map[string]struct {
		// change makes the container at the derived name differ from the
		// controller's; nil labels mean no container there.
		change  func(labels map[string]string) map[string]string
		stopped bool
		noUID   bool
		refused string
		// user is the container's user, for a Sandbox without spec.user
		// (the id allocated to it); empty: spec.user is 1000:1000.
		user string
	}{
		"the sandbox's own container": {change: func(l map[string]string) map[string]string { return l }},
		"another sandbox's UID": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelSandboxUID] = "another-uid"
			return l
		}, refused: "label afe.sandbox-uid differs"},
		"no UID label": {change: func(l map[string]string) map[string]string {
			delete(l, afev1.LabelSandboxUID)
			return l
		}, refused: "label afe.sandbox-uid differs"},
		"the proxy's role": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelRole] = afev1.RoleProxy
			return l
		}, refused: "label afe.role differs"},
		"no role": {change: func(l map[string]string) map[string]string {
			delete(l, afev1.LabelRole)
			return l
		}, refused: "label afe.role differs"},
		"another instance": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelController] = "other"
			return l
		}, refused: "label afe.controller differs"},
		"another namespace": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelNamespace] = "other"
			return l
		}, refused: "label afe.namespace differs"},
		"another sandbox name": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelSandbox] = "other"
			return l
		}, refused: "label afe.sandbox differs"},
		"no container at the name; status names a right one": {
			change:  func(map[string]string) map[string]string { return nil },
			refused: "has no container",
		},
		"stopped": {change: func(l map[string]string) map[string]string { return l }, stopped: true, refused: "not running"},
		"a Sandbox without spec.user: the id its container records": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelUser] = "1900000042:1900000042"
			return l
		}, user: "1900000042:1900000042"},
		"a Sandbox without spec.user, a container without afe.uid": {change: func(l map[string]string) map[string]string {
			return l
		}, user: "1000:1000", refused: "carries no allocated user"},
		"a Sandbox without spec.user, afe.uid not the container's user": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelUser] = "1900000042:1900000042"
			return l
		}, user: "1000:1000", refused: "carries no allocated user"},
		"a Sandbox without UID, a container with an empty UID label": {change: func(l map[string]string) map[string]string {
			l[afev1.LabelSandboxUID] = ""
			return l
		}, noUID: true, refused: "has no UID"},
	}
	i := 0
	for name, tc := range tests {
		i++
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("sbx-%d", i), UID: types.UID(fmt.Sprintf("uid-%s-%d", run, i)),
		}}
		sbx.Spec.User = "1000:1000"
		if tc.user != "" {
			sbx.Spec.User = ""
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			decoy, err := engine.RunContainer(ctx, docker.ContainerSpec{
				Name: "afe-decoy-" + run + "-" + sbx.Name, Image: dockertest.TestImage,
				Command: []string{"sleep", "3600"}, Network: "none", Labels: rightLabels(sbx),
			})
			if err != nil {
				t.Fatal(err)
			}
			sbx.Status.ContainerName, sbx.Status.ContainerID = decoy.Name, decoy.ID

			var made *docker.Container
			if labels := tc.change(rightLabels(sbx)); labels != nil {
				command := []string{"sleep", "3600"}
				if tc.stopped {
					command = []string{"true"}
				}
				made, err = engine.RunContainer(ctx, docker.ContainerSpec{
					Name:  naming.Container(naming.Key(sbx.Namespace, sbx.Name)),
					Image: dockertest.TestImage, Command: command, Network: "none",
					Labels: labels, User: tc.user,
				})
				if err != nil {
					t.Fatal(err)
				}
				for tc.stopped && made.Running {
					time.Sleep(50 * time.Millisecond)
					if made, err = engine.InspectContainer(ctx, made.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.noUID {
				sbx.UID = ""
			}

			got, err := containerFor(ctx, engine, sbx, instance)
			if tc.refused != "" {
				if err == nil {
					t.Fatalf("reached container %s; want refused", got.containerID)
				}
				var se *statusError
				if !errors.As(err, &se) || se.code != http.StatusConflict || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("error %q does not say it refused because of %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(made.ID, got.containerID); d != "" {
				t.Fatalf("reached another container than the sandbox's (decoy %s): %s", decoy.ID, d)
			}
			if want := tc.user; want != "" && got.user != want {
				t.Fatalf("executes as %s, not the id allocated to the sandbox, %s", got.user, want)
			}
		})
	}
}

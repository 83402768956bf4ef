package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyManifests creates, or updates to what the files say, every object of
// the YAML files (several documents each): for `make run`, the ClusterRoles
// of config/rbac/access_roles.yaml that docs/access.md has an admin bind.
func (cp *ControlPlane) ApplyManifests(ctx context.Context, files ...string) error {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	for _, f := range files {
		objs, err := readManifests(f)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := createOrUpdate(ctx, c, obj); err != nil {
				return fmt.Errorf("%s: %s %s: %w", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// readManifests reads the objects of a YAML file; empty documents are
// skipped.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%s: an object without kind or name", path)
		}
		out = append(out, obj)
	}
}

func createOrUpdate(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	err := c.Create(ctx, obj.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return err
	}
	want := obj.DeepCopy()
	want.SetResourceVersion(have.GetResourceVersion())
	return c.Update(ctx, want)
}

package client

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// waitFor reads obj (its namespace and name set) and watches it until
// done says it is done or fails. A deleted or missing object is a
// NotFound error; the context's end a TimedOut error.
func (c *Client) waitFor(ctx context.Context, obj ctrlclient.Object, list ctrlclient.ObjectList, done func() (bool, error)) error {
	key := ctrlclient.ObjectKeyFromObject(obj)
	kind := kindName(obj)
	for {
		if err := c.kube.Get(ctx, key, obj); err != nil {
			return wrap(err, "%s %s", kind, key.Name)
		}
		if ok, err := done(); ok || err != nil {
			return err
		}
		w, err := c.kube.Watch(ctx, list, ctrlclient.InNamespace(key.Namespace),
			ctrlclient.MatchingFields{"metadata.name": key.Name},
			&ctrlclient.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
		if err != nil {
			return wrap(err, "watch %s %s", kind, key.Name)
		}
		ok, err := drain(ctx, w, obj, done)
		w.Stop()
		if ok || err != nil {
			return wrap(err, "%s %s", kind, key.Name)
		}
		// The watch ended (the server ends watches now and then): read
		// the object again and watch on.
	}
}

// drain copies each version of the object the watch sends into obj until
// done says it is done or fails, the object is deleted, the watch ends
// (false, nil) or the context does.
func drain(ctx context.Context, w watch.Interface, obj ctrlclient.Object, done func() (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				gr := schema.GroupResource{Group: afev1.GroupVersion.Group, Resource: kindName(obj)}
				return false, apierrors.NewNotFound(gr, obj.GetName())
			case watch.Error:
				return false, apierrors.FromObject(ev.Object)
			}
			next, ok := ev.Object.(ctrlclient.Object)
			if !ok {
				continue
			}
			copyInto(obj, next)
			if ok, err := done(); ok || err != nil {
				return ok, err
			}
		}
	}
}

// copyInto sets dst to src, both of one of this package's kinds.
func copyInto(dst, src ctrlclient.Object) {
	switch d := dst.(type) {
	case *afev1.Sandbox:
		if s, ok := src.(*afev1.Sandbox); ok {
			*d = *s
		}
	case *afev1.Ticket:
		if s, ok := src.(*afev1.Ticket); ok {
			*d = *s
		}
	case *afev1.Run:
		if s, ok := src.(*afev1.Run); ok {
			*d = *s
		}
	}
}

// kindName is the resource of obj, for messages.
func kindName(obj ctrlclient.Object) string {
	switch obj.(type) {
	case *afev1.Sandbox:
		return "sandboxes"
	case *afev1.Ticket:
		return "tickets"
	case *afev1.Run:
		return "runs"
	}
	return strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind)
}

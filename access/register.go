package access

import (
	"context"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// apiServiceGVK is apiregistration.k8s.io/v1 APIService (written
// unstructured: its Go types live in the aggregator's module).
var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// register writes the APIService, pointing at the Service with this
// server's CA, and, with ExternalName, the Service (and its namespace).
func (s *Server) register(ctx context.Context) error {
	port := int32(443)
	if s.opts.ServicePort > 0 {
		port = s.opts.ServicePort
	}
	if s.opts.ExternalName != "" {
		port = s.port()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.opts.Service.Namespace}}
		if err := s.writer.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Service.Namespace, Name: s.opts.Service.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, s.writer, svc, func() error {
			svc.Spec = corev1.ServiceSpec{
				Type:         corev1.ServiceTypeExternalName,
				ExternalName: s.opts.ExternalName,
				Ports:        []corev1.ServicePort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
			}
			return nil
		}); err != nil {
			return fmt.Errorf("service %s: %w", s.opts.Service, err)
		}
	}
	// The aggregator writes the APIService's status meanwhile, and in
	// per-node mode every manager writes it at its start: a conflict, or a
	// creation another manager made first, is retried.
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		return s.writeAPIService(ctx, port)
	})
	if err != nil {
		return fmt.Errorf("APIService %s: %w", APIServiceName, err)
	}
	s.log.Info("Registered the access API", "apiService", APIServiceName, "service", s.opts.Service.String(), "port", port)
	return nil
}

// writeAPIService creates or updates the APIService.
func (s *Server) writeAPIService(ctx context.Context, port int32) error {
	as := &unstructured.Unstructured{}
	as.SetGroupVersionKind(apiServiceGVK)
	as.SetName(APIServiceName)
	_, err := controllerutil.CreateOrUpdate(ctx, s.writer, as, func() error {
		as.SetLabels(map[string]string{"app.kubernetes.io/name": "afe-sandbox-controller"})
		return unstructured.SetNestedField(as.Object, map[string]any{
			"group":                Group,
			"version":              Version,
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
			"caBundle":             base64.StdEncoding.EncodeToString(s.caBundle()),
			"service": map[string]any{
				"namespace": s.opts.Service.Namespace,
				"name":      s.opts.Service.Name,
				"port":      int64(port),
			},
		}, "spec")
	})
	return err
}

// registerOnRotation writes the APIService again each time the managers'
// CA changes (per-node mode), so that the aggregator trusts the serving
// certificates issued from the new one.
func (s *Server) registerOnRotation(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.peer.authority.Changed():
			if err := s.register(ctx); err != nil && ctx.Err() == nil {
				s.log.Error(err, "Cannot register the access API with the managers' new CA")
			}
		}
	}
}

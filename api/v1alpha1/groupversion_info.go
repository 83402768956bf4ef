// Package v1alpha1 contains the API of the afe sandbox controller: Tickets,
// Sandboxes and Runs in the sandbox.afe.dev group.
// +kubebuilder:object:generate=true
// +groupName=sandbox.afe.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "sandbox.afe.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the objects of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the objects of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are the objects of this package, registered by each kind's
	// file.
	knownTypes []runtime.Object
)

func register(objects ...runtime.Object) { knownTypes = append(knownTypes, objects...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

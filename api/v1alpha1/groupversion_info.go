// Package v1alpha1 contains the API of the afe sandbox controller: Tickets,
// Sandboxes and Runs in the sandbox.afe.dev group.
// +kubebuilder:object:generate=true
// +groupName=sandbox.afe.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "sandbox.afe.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the objects of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the objects of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Package v1alpha1 holds the operator's versioned configuration file format,
// OperatorConfig, in the group operator.featuregate-operator.io.
//
// OperatorConfig is read from a file (--config), the way kube components take
// their versioned configuration; it is not a resource served by the cluster.
// It is a runtime.Object so that it carries apiVersion/kind and can be
// registered in a scheme (the +kubebuilder:object:root marker gives it
// DeepCopyObject), but no CRD is generated for it: the
// +kubebuilder:skipversion marker below drops this version from CRD
// generation, so `make manifests` (controller-gen crd paths=./...) writes
// nothing for this package, and nothing needs installing in a cluster.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skipversion
// +groupName=operator.featuregate-operator.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the operator's configuration types.
const GroupName = "operator.featuregate-operator.io"

var (
	// GroupVersion is the group version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package, and their
	// defaulting functions, in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults)

	// AddToScheme adds the types of this package, and their defaulting
	// functions, to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &OperatorConfig{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// RegisterDefaults adds the defaulting functions of this package to a scheme,
// so that scheme.Default(obj) defaults an OperatorConfig.
func RegisterDefaults(s *runtime.Scheme) error {
	s.AddTypeDefaultingFunc(&OperatorConfig{}, func(obj interface{}) {
		SetDefaults_OperatorConfig(obj.(*OperatorConfig))
	})
	return nil
}

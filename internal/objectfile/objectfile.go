// Package objectfile decodes a Kubernetes object that a file holds (YAML or
// JSON), after checking that it is the kind the caller asked for: the one
// place where "is this file the object I think it is" is decided, for the
// guard's FeatureGate file, the commands' input files and a must-gather's.
// Errors say what is wrong without the file's name; callers prefix it.
package objectfile

import (
	"bytes"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Decode decodes data into obj when its apiVersion and kind are gvk's.
// Strict refuses fields obj does not know (a user's misspelt field); a
// file another component renders is read leniently, as a newer release may
// add fields.
func Decode(data []byte, gvk schema.GroupVersionKind, obj any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty")
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return fmt.Errorf("not a YAML or JSON object: %w", err)
	}
	want := gvk.GroupVersion().String()
	switch {
	case tm.Kind != gvk.Kind:
		return fmt.Errorf("is not a %s: kind is %q", gvk.Kind, tm.Kind)
	case tm.APIVersion != want:
		return fmt.Errorf("is not a %s: apiVersion is %q, want %q", gvk.Kind, tm.APIVersion, want)
	}
	if strict {
		return yaml.UnmarshalStrict(data, obj)
	}
	return yaml.Unmarshal(data, obj)
}

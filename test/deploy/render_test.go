package deploy

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The kustomize build of config/default is made once and shared: it is the
// same for every test, and installing kustomize is the slow part.
var (
	renderOnce   sync.Once
	renderedObjs []*unstructured.Unstructured
	renderErr    error
	// kustomizeCleanup removes the kustomize installed for the tests, if
	// one was.
	kustomizeCleanup = func() {}
)

// rendered returns the objects of `kustomize build config/default`, with the
// kustomize version the Makefile pins.
func rendered(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	renderOnce.Do(func() { renderedObjs, renderErr = render() })
	if renderErr != nil {
		t.Fatalf("kustomize build config/default: %v", renderErr)
	}
	out := make([]*unstructured.Unstructured, 0, len(renderedObjs))
	for _, o := range renderedObjs {
		out = append(out, o.DeepCopy())
	}
	return out
}

func render() ([]*unstructured.Unstructured, error) {
	bin, cleanup, err := harness.Kustomize(root)
	kustomizeCleanup = cleanup
	if err != nil {
		return nil, err
	}
	out, err := harness.KustomizeBuild(bin, filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	return decodeAll(out)
}

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if raw == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: raw})
	}
}

// find returns the one rendered object of kind whose name ends with suffix
// (the name prefix is kustomize's business, not the test's).
func find(t *testing.T, objs []*unstructured.Unstructured, kind, suffix string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one rendered %s named *%s, found %d", kind, suffix, len(found))
	}
	return found[0]
}

// ofKinds returns the rendered objects of the given kinds.
func ofKinds(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range kinds {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// convert turns a rendered object into its typed form.
func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

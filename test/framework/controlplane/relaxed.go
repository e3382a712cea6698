package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// RelaxedCRDs writes into dir a copy of the FeatureGate CRD without the
// featureSet enum and its CEL rules, what an older or newer release's CRD
// might accept, and returns it with the ClusterOperator CRD. It admits
// feature sets never seen ("Bogus", "TechPreviewNoUpgrade ") and changes the
// real CRD forbids (away from TechPreviewNoUpgrade).
func RelaxedCRDs(dir string) ([]string, error) {
	crds, err := OpenShiftCRDs()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(crds[0])
	if err != nil {
		return nil, err
	}
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", crds[0], err)
	}
	versions, _, err := unstructured.NestedSlice(crd, "spec", "versions")
	if err != nil {
		return nil, fmt.Errorf("%s: spec.versions: %w", crds[0], err)
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%s: spec.versions is empty", crds[0])
	}
	spec := []string{"schema", "openAPIV3Schema", "properties", "spec"}
	featureSet := append(append([]string{}, spec...), "properties", "featureSet")
	for _, v := range versions {
		m := v.(map[string]any)
		if _, found, _ := unstructured.NestedFieldNoCopy(m, append(featureSet, "enum")...); !found {
			return nil, errors.New(crds[0] + ": no featureSet enum to remove (has the schema changed?)")
		}
		unstructured.RemoveNestedField(m, append(featureSet, "enum")...)
		unstructured.RemoveNestedField(m, append(featureSet, "x-kubernetes-validations")...)
		unstructured.RemoveNestedField(m, append(spec, "x-kubernetes-validations")...)
	}
	if err := unstructured.SetNestedSlice(crd, versions, "spec", "versions"); err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "featuregates-relaxed.crd.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}
	return []string{path, crds[1]}, nil
}

package deploy

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// PROJECT describes the tree as it is: go/v3's layout (main.go and
// controllers/ at the top), the external FeatureGate with its controller, and
// our own config type where its package really is.
func TestProjectFileDescribesTheTree(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	g.Expect(err).NotTo(HaveOccurred())
	var project struct {
		Version     string   `json:"version"`
		Domain      string   `json:"domain"`
		ProjectName string   `json:"projectName"`
		Repo        string   `json:"repo"`
		Layout      []string `json:"layout"`
		Resources   []struct {
			Group      string `json:"group"`
			Version    string `json:"version"`
			Kind       string `json:"kind"`
			Domain     string `json:"domain"`
			Path       string `json:"path"`
			External   bool   `json:"external"`
			Controller bool   `json:"controller"`
		} `json:"resources"`
	}
	g.Expect(yaml.UnmarshalStrict(data, &project)).To(Succeed())
	g.Expect(project.Version).To(Equal("3"))
	g.Expect(project.Repo).To(Equal("github.com/featuregate-operator/operator"))
	g.Expect(project.Layout).To(ConsistOf("go.kubebuilder.io/v3"))
	for _, p := range []string{"main.go", "controllers", "api/v1alpha1"} {
		g.Expect(filepath.Join(root, p)).To(BeAnExistingFile(), "go/v3 layout: %s", p)
	}
	g.Expect(project.Resources).To(HaveLen(2))
	fg, oc := project.Resources[0], project.Resources[1]
	g.Expect([]any{fg.Group, fg.Domain, fg.Version, fg.Kind, fg.Path, fg.External, fg.Controller}).To(Equal(
		[]any{"config", "openshift.io", "v1", "FeatureGate", "github.com/openshift/api/config/v1", true, true}))
	g.Expect([]any{oc.Group, oc.Domain, oc.Version, oc.Kind, oc.Path}).To(Equal(
		[]any{"operator", project.Domain, "v1alpha1", "OperatorConfig", project.Repo + "/api/v1alpha1"}))
}

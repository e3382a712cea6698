package featuregatetest

import (
	"os"
	"path/filepath"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/yaml"
)

// File is a FeatureGate file for featuregate.Options.File, changed the way a
// ConfigMap volume changes (a new file renamed over the old, never a torn
// write). With it a test runs the whole manager the guard builds, the
// operator's own controllers included, with no API server to read the
// FeatureGate from, and changes the feature set under it: the manager's
// Start then returns nil and the guard's StopReason names the change.
type File struct {
	t    testing.TB
	path string
}

// NewFile writes fg to a file in a directory of the test's, removed when
// the test ends.
func NewFile(t testing.TB, fg *configv1.FeatureGate) *File {
	t.Helper()
	f := &File{t: t, path: filepath.Join(t.TempDir(), "featuregate.yaml")}
	f.Set(fg)
	return f
}

// Path is the file's path, for Options.File.
func (f *File) Path() string { return f.path }

// Set replaces the file's FeatureGate with fg in one rename.
func (f *File) Set(fg *configv1.FeatureGate) {
	f.t.Helper()
	fg = fg.DeepCopy()
	fg.APIVersion, fg.Kind = configv1.GroupVersion.String(), "FeatureGate"
	data, err := yaml.Marshal(fg)
	if err != nil {
		f.t.Fatalf("featuregatetest: marshal FeatureGate: %v", err)
	}
	next := f.path + ".next"
	if err := os.WriteFile(next, data, 0o600); err != nil {
		f.t.Fatalf("featuregatetest: %v", err)
	}
	if err := os.Rename(next, f.path); err != nil {
		f.t.Fatalf("featuregatetest: %v", err)
	}
}

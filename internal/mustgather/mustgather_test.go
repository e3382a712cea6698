package mustgather

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
)

// tarOf writes files (path → content) into a .tar and returns its path.
func tarOf(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mg.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const fg = "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nmetadata:\n  name: cluster\nspec:\n  featureSet: TechPreviewNoUpgrade\n"

func files() map[string]string {
	return map[string]string{
		"./mg/image/cluster-scoped-resources/config.openshift.io/featuregates/cluster.yaml": fg,
		"./mg/image/namespaces/openshift-a/openshift-a.yaml":                                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-a\n",
		"./mg/image/namespaces/openshift-a/core/configmaps.yaml":                            "apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata:\n    name: here\n    namespace: openshift-a\n",
		"./mg/image/namespaces/openshift-a/pods/p/p/logs/current.log":                       "a log line",
		"../escape.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: escape\n",
	}
}

func TestOpenArchiveReadsInPlace(t *testing.T) {
	g, err := Open(tarOf(t, files()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Presence{"openshift-a/here": Present, "openshift-a/gone": Absent, "openshift-b/x": Unknown} {
		ns, n, _ := strings.Cut(name, "/")
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
		obj.SetNamespace(ns)
		obj.SetName(n)
		if got, evidence, err := g.Present(obj); err != nil || got != want {
			t.Errorf("%s: %v (%s, %v), want %v", name, got, evidence, err, want)
		}
	}
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	r := Reader{Gather: g, Scheme: scheme}
	got := &configv1.FeatureGate{}
	if err := r.Get(context.Background(), client.ObjectKey{Name: "cluster"}, got); err != nil || got.Spec.FeatureSet != configv1.TechPreviewNoUpgrade {
		t.Fatalf("Get: %v, %+v", err, got.Spec)
	}
	err = r.Get(context.Background(), client.ObjectKey{Name: clusterinputs.ClusterVersionName}, &configv1.ClusterVersion{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "mg.tar:mg/image/cluster-scoped-resources/config.openshift.io/clusterversions") {
		t.Fatalf("absent ClusterVersion: %v; want NotFound naming the archive's files", err)
	}
}

// An archive larger than its bound is refused, naming it; logs and other
// files do not count.
func TestOpenArchiveIsBounded(t *testing.T) {
	name := tarOf(t, files())
	if _, err := Open(name, Options{MaxArchiveSize: 64}); err == nil || !strings.Contains(err.Error(), name+": its YAML and JSON files hold more than the 64-byte limit") {
		t.Fatalf("err = %v", err)
	}
}

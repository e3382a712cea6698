package clusterinputs

import (
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func reader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func clusterVersion(known, enabled []configv1.ClusterVersionCapability) *configv1.ClusterVersion {
	return &configv1.ClusterVersion{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterVersionName},
		Spec:       configv1.ClusterVersionSpec{Overrides: []configv1.ComponentOverride{{Kind: "ConfigMap", Name: "x", Unmanaged: true}}},
		Status: configv1.ClusterVersionStatus{
			Desired:      configv1.Release{Version: "4.22.1"},
			Capabilities: configv1.ClusterVersionCapabilitiesStatus{KnownCapabilities: known, EnabledCapabilities: enabled},
		},
	}
}

// A ClusterVersion whose status knows no capability yet turns the filter
// off, rather than excluding every annotated manifest; its overrides hold
// either way.
func TestRead(t *testing.T) {
	ctx := context.Background()
	in, err := Read(ctx, reader(t))
	if err != nil || in.Filter() != "off: ClusterVersion version does not exist" {
		t.Errorf("absent: %q, %v", in.Filter(), err)
	}
	in, err = Read(ctx, reader(t, clusterVersion(nil, nil)))
	if err != nil || in.Filter() != "off: ClusterVersion version has no status.capabilities yet" || len(in.Overrides) != 1 {
		t.Errorf("no capabilities: %q %v, %v", in.Filter(), in.Overrides, err)
	}
	known := []configv1.ClusterVersionCapability{configv1.ClusterVersionCapabilityConsole, configv1.ClusterVersionCapabilityInsights}
	in, err = Read(ctx, reader(t, clusterVersion(known, known[:1])))
	if err != nil || in.Filter() != "on: 1 of 2 known capabilities enabled" || len(in.Overrides) != 1 {
		t.Errorf("capabilities: %q %v, %v", in.Filter(), in.Overrides, err)
	}
}

// The version marker is the cluster's own release version, as the guard
// resolves it; any other release version is taken as given, unread.
func TestResolveReleaseVersion(t *testing.T) {
	ctx := context.Background()
	if v, err := ResolveReleaseVersion(ctx, reader(t), "4.21.0"); err != nil || v != "4.21.0" {
		t.Errorf("4.21.0: %q, %v", v, err)
	}
	if v, err := ResolveReleaseVersion(ctx, reader(t, clusterVersion(nil, nil)), "0.0.1-snapshot"); err != nil || v != "4.22.1" {
		t.Errorf("marker: %q, %v", v, err)
	}
	if _, err := ResolveReleaseVersion(ctx, reader(t), "0.0.1-snapshot"); err == nil || !strings.Contains(err.Error(), "release version 0.0.1-snapshot is the version marker; ClusterVersion version not read") {
		t.Errorf("marker without a ClusterVersion: %v", err)
	}
}

// A release version without a numeric major version turns the
// major-version filter off in the Applier's Cluster, and is an error for
// whoever asks SetMajorVersion.
func TestMajorVersion(t *testing.T) {
	in := Inputs{}
	if c := in.Cluster(nil, "p", "x", "4.22.0"); c.MajorVersion == nil || *c.MajorVersion != 4 || c.Profile != "p" || c.ExcludeIdentifier != "x" {
		t.Errorf("4.22.0: %+v", c)
	}
	if c := in.Cluster(nil, "", "", "latest"); c.MajorVersion != nil {
		t.Errorf("latest: major version %d, want the filter off", *c.MajorVersion)
	}
	c := in.Cluster(nil, "", "", "")
	if err := SetMajorVersion(&c, "next"); err == nil || c.MajorVersion != nil {
		t.Errorf("next: %v, %v", c.MajorVersion, err)
	}
}

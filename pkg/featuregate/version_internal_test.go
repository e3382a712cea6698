package featuregate

import (
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestVersionOf(t *testing.T) {
	cv := &configv1.ClusterVersion{}
	cv.Name = "version"
	if _, err := versionOf(cv, "0.0.1-snapshot"); err == nil {
		t.Error("a ClusterVersion without a version gave one")
	}
	cv.Status.History = []configv1.UpdateHistory{{Version: "4.21.1"}, {Version: "4.20.0"}}
	if v, err := versionOf(cv, "0.0.1-snapshot"); err != nil || v.version != "4.21.1" || v.from != "ClusterVersion version status.history[0].version" {
		t.Errorf("history: %+v, %v; want the newest entry", v, err)
	}
	cv.Status.Desired.Version = "4.22.0"
	if v, err := versionOf(cv, "0.0.1-snapshot"); err != nil || v.version != "4.22.0" {
		t.Errorf("desired: %+v, %v", v, err)
	}
}

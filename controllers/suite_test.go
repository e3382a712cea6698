package controllers

import (
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Each test starts its own control plane (applyEnv): the seed manifests are
// cluster-wide objects, and each test decides which of them must exist.
func TestMain(m *testing.M) {
	// Shown only when a test fails (or with -v).
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	os.Exit(m.Run())
}

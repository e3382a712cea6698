package controllers

import (
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/featuregate-operator/operator/internal/controlplane"
)

// testCP is one real etcd and kube-apiserver, with the OpenShift CRDs,
// shared by the tests in this package: each start costs seconds. Tests keep
// out of each other's way by the names of what they create, and delete it.
var testCP *controlplane.ControlPlane

func TestMain(m *testing.M) {
	// Shown only when a test fails (or with -v).
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		// No skipping: a missing bin/k8s is a failure, and this says how
		// to fix it.
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	testCP = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
		code = 1
	}
	os.Exit(code)
}

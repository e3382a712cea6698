package librarygo_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/featuregate-operator/operator/pkg/featuregate/librarygo"
)

// A controllercmd operator moves to the guard by changing the constructor
// of its FeatureGateAccess, and by giving the command a Readiness the
// access reports to. The rest of its run function stays as library-go's
// doc comment writes it.
func ExampleNewFeatureGateAccess() {
	readiness := &librarygo.Readiness{}
	run := func(ctx context.Context, cc *controllercmd.ControllerContext) error {
		desiredVersion := os.Getenv("OPERATOR_IMAGE_VERSION")
		missingVersion := "0.0.1-snapshot"

		// Was: featuregates.NewFeatureGateAccess(desiredVersion, missingVersion,
		//	configInformers.Config().V1().ClusterVersions(),
		//	configInformers.Config().V1().FeatureGates(), cc.EventRecorder)
		access, err := librarygo.NewFeatureGateAccess(cc.KubeConfig, desiredVersion, missingVersion,
			cc.EventRecorder, librarygo.ReportTo(readiness))
		if err != nil {
			return err
		}
		go access.Run(ctx)

		select {
		case <-access.InitialFeatureGatesObserved():
			featureGates, _ := access.CurrentFeatureGates()
			klog.Infof("FeatureGates initialized: knownFeatureGates=%v", featureGates.KnownFeatures())
		case <-time.After(1 * time.Minute):
			klog.Errorf("timed out waiting for FeatureGate detection")
			return fmt.Errorf("timed out waiting for FeatureGate detection")
		}
		// Controllers built from the gates, each asking access.Current
		// before it writes what the gates decide.
		<-ctx.Done()
		return nil
	}
	cmd := controllercmd.NewControllerCommandConfig("example-operator", version.Info{}, run, clock.RealClock{}).
		WithHealthChecks(readiness).
		NewCommandWithContext(context.Background())
	_ = cmd // main: cmd.Execute()
}

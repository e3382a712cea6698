package featuregatetest_test

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// decide is an adopter's reconciler in small: it depends on featuregate.Gates,
// acts only on a view the guard vouches for, and requeues otherwise.
func decide(gates featuregate.Gates) string {
	if !gates.Current() {
		return "requeue"
	}
	if gates.Enabled("ExampleGate") {
		return "act with ExampleGate"
	}
	return "act without ExampleGate"
}

// A reconciler's unit test: the test double answers what the test says, and
// simulates an outage and a change the way the guard reports them.
func Example() {
	gates := featuregatetest.New(configv1.TechPreviewNoUpgrade, "ExampleGate")
	fmt.Println(decide(gates))

	gates.SetStale(true) // the API is in trouble: the guard cannot vouch
	fmt.Println(decide(gates))
	gates.SetStale(false)

	gates.Change("feature set changed from TechPreviewNoUpgrade to CustomNoUpgrade")
	fmt.Println(decide(gates))
	select {
	case <-gates.StopRequested():
		fmt.Println("stop requested")
	default:
	}

	var before featuregatetest.Gates // no snapshot taken yet
	fmt.Println(decide(&before))
	// Output:
	// act with ExampleGate
	// requeue
	// requeue
	// stop requested
	// requeue
}

package fleet

import (
	"flag"
	"testing"
)

var flagReadCost = flag.Bool("fleet.readcost", false, "Run TestProofReadCost: what each kind of read costs etcd and kube-apiserver, on a fleet's FeatureGate with no adopter running (make fleet measures it too).")

// TestProofReadCost measures ReadCosts alone (make fleet-readcost).
func TestProofReadCost(t *testing.T) {
	if !*flagReadCost {
		t.Skip("-fleet.readcost not set")
	}
	f := New(t, Config{N: *flagN, Seed: seed(t), Settle: *flagSettle, Consumer: bins.consumer})
	rs, err := f.ReadCosts(t.Context(), 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read costs:\n%s", readCostTable(rs))
}

// Command kube-controller-manager is the upstream controller manager
// (Deployments, ReplicaSets, EndpointSlices, namespaces, garbage collection,
// the kube-root-ca.crt ConfigMap), for the single-node cluster of
// `make test-cluster` (test/framework/node).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}

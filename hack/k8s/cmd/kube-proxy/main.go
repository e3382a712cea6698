// Command kube-proxy is the upstream Service proxy (iptables mode), so that
// the tests of `make test-cluster` reach the operator's metrics through its
// Service's ClusterIP and the operator reaches the API server through the
// kubernetes Service, as in a cluster (test/framework/node).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}

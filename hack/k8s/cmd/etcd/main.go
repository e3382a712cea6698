// Command etcd is the upstream etcd server at the version k8s.io/kubernetes
// pins, the storage behind the local kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

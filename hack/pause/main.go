// Command pause is the sandbox ("pause") container of the node that `make
// test-cluster` runs: no registry is reachable there, so the image the
// container runtime needs for every pod is this program, built static and
// packaged by test/framework/image. It holds the pod's namespaces open by doing
// nothing until it is told to stop, and reaps the children it inherits when
// it is the pod's init process (a shared process namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// Package e2e runs the operator binary as a process against the project's
// local control plane (real etcd and kube-apiserver): the process-level tests
// of the startup story (TestProcess...) and the fault-injection suite
// (TestFault..., `make test-faults`). Everything lives in _test.go files;
// TestMain builds the manager once per run, so a clean checkout needs only
// the control plane binaries (`make envtest-assets`) and `go test`.
package e2e

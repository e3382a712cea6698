package main

import "github.com/featuregate-operator/operator/test/framework/harness"

// The /proc readers live in the harness, shared with test/fleet; these
// names keep the bench's own spelling.
type memStatus = harness.MemStatus

var (
	procStatus   = harness.ProcStatus
	pidsMatching = harness.PIDsMatching
	cpuOf        = harness.CPUOf
	procCPU      = harness.ProcCPU
	parseStatCPU = harness.ParseStatCPU
)

package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// KubeletRestart is the real-kubelet measurement: test/cluster's
// TestBenchKubeletRestart (`make bench-cluster`, as root) writes it, and
// test/bench reports it in BENCHMARKS.md beside the simulated handover.
// One entry per run; durations in nanoseconds.
type KubeletRestart struct {
	// ChangeToReady: the FeatureGate patch answered → the replacement
	// container's pod Ready in the API.
	ChangeToReady []time.Duration `json:"changeToReady"`
	// SnapshotToReady: the replacement's "Startup snapshot taken" line (its
	// own timestamp) → the pod Ready: what the readiness probe costs.
	SnapshotToReady []time.Duration `json:"snapshotToReady"`
	// Probe describes the readiness probe as shipped.
	Probe string `json:"probe"`
	// Measured is when.
	Measured time.Time `json:"measured"`
}

// WriteKubeletRestart writes m to path as JSON.
func WriteKubeletRestart(path string, m KubeletRestart) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write the kubelet measurement: %w", err)
	}
	return nil
}

// ReadKubeletRestart reads what WriteKubeletRestart wrote.
func ReadKubeletRestart(path string) (KubeletRestart, error) {
	var m KubeletRestart
	data, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("kubelet measurement %s: %w", path, err)
	}
	return m, nil
}

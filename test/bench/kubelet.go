package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// measureKubelet reports the real-kubelet measurement: it needs root and a
// node of its own (test/framework/node), so `make bench-cluster` takes it
// (test/cluster's TestBenchKubeletRestart) and leaves it in the -kubelet
// file, which `make bench` runs first when it is root.
func (b *bench) measureKubelet(context.Context) *section {
	sec := &section{Name: "kubelet", Title: "Restart on a real kubelet (2 CPUs, single-node cluster)"}
	sec.Method = []string{
		"The simulated handover above starts a replacement the moment a process exits; here a real kubelet (v1.37, containerd, `make test-cluster`'s node) does, " +
			"and the readiness probe as config/manager ships it decides when the pod is Ready. " +
			"Each run deploys the operator afresh (kustomize build of config/default, `kubectl apply --server-side`), waits for the pod to be Ready, patches the FeatureGate's feature set " +
			"and polls the pod every 25 ms until the restarted container's pod is Ready (restartCount 1: the kubelet restarts a container that exits 0 at once the first time, then on the CrashLoopBackOff schedule). " +
			"Measured from the patch's API response, and from the replacement's own `Startup snapshot taken` timestamp.",
	}
	change := &series{Label: "real kubelet: change → replacement pod Ready", Short: "kubelet: change -> Ready"}
	snapshot := &series{Label: "real kubelet: replacement's snapshot → pod Ready", Short: "kubelet: snapshot -> Ready", Target: time.Second}
	m, err := b.kubeletMeasurement()
	if err != nil {
		sec.Rows = [][2]string{{change.Label, err.Error()}}
		return sec
	}
	change.Values, snapshot.Values = m.ChangeToReady, m.SnapshotToReady
	sec.Series = []*series{change, snapshot}
	sec.Rows = [][2]string{{"readiness probe", m.Probe}, {"measured", m.Measured.UTC().Format("2006-01-02 15:04 MST") + " by `make bench-cluster`"}}
	if s := summarize(snapshot.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"replacement Ready within ~1 s of its snapshot (p50)", "p50 " + fmtDur(s.P50) + ", p99 " + fmtDur(s.P99), s.P50 <= 1200*time.Millisecond})
	}
	return sec
}

// kubeletMeasurement reads the -kubelet file; the error says why there is
// none, as the report's row.
func (b *bench) kubeletMeasurement() (harness.KubeletRestart, error) {
	if b.kubelet == "" {
		return harness.KubeletRestart{}, errors.New("not measured (no -kubelet file: `sudo make bench` measures it)")
	}
	m, err := harness.ReadKubeletRestart(b.kubelet)
	switch {
	case errors.Is(err, fs.ErrNotExist) && os.Geteuid() != 0:
		return m, errors.New("not measured (needs root: `sudo make bench`)")
	case errors.Is(err, fs.ErrNotExist):
		return m, fmt.Errorf("not measured (`make bench-cluster` left no %s)", b.kubelet)
	case err != nil:
		return m, fmt.Errorf("not measured (%w)", err)
	}
	return m, nil
}

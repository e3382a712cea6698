package cluster

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// outage is how long the API server is down.
const outage = 60 * time.Second

// The API server goes away for a minute while the operator runs, leader
// election on as shipped: the container keeps running (same process, no
// liveness failure, still serving its probes), and a FeatureGate change
// made meanwhile (through a second API server on the same etcd, which no
// pod can reach) restarts it once, after the API server is back.
func TestAPIOutage(t *testing.T) {
	g := NewWithT(t)
	ctx, pod := running(t, configv1.Default, 10*time.Minute)
	id := managerStatus(pod).ContainerID
	pid, err := cluster.ContainerPID(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())

	second, stopSecond, err := cluster.SecondAPIServer(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(stopSecond)
	changer := harness.Client(t, second)

	cluster.StopAPIServer()
	back := false
	t.Cleanup(func() {
		if !back {
			if err := cluster.StartAPIServer(context.Background()); err != nil {
				t.Errorf("start the API server again: %v", err)
			}
		}
	})
	down := time.Now()
	running := func(g Gomega) {
		g.Expect(cluster.ContainerPID(ctx, id)).To(Equal(pid), "the same process")
		g.Expect(probe(ctx, pod.Status.PodIP, "/healthz")).To(Equal(http.StatusOK))
		g.Expect(probe(ctx, pod.Status.PodIP, "/readyz")).To(Equal(http.StatusOK), "ready: it has its snapshot")
	}
	g.Consistently(running).WithTimeout(outage / 2).WithPolling(time.Second).Should(Succeed())
	harness.SetFeatureSet(t, changer, "cluster", configv1.TechPreviewNoUpgrade)
	g.Consistently(running).WithTimeout(outage - time.Since(down)).WithPolling(time.Second).Should(Succeed())
	stopSecond()

	starting := time.Now()
	g.Expect(cluster.StartAPIServer(ctx)).To(Succeed())
	back = true
	returned := time.Now()
	t.Logf("API server down for %s; ready %s after its start", starting.Sub(down).Round(time.Second), returned.Sub(starting).Round(10*time.Millisecond))
	restarted := restartedOnce(ctx, t, pod.Name)
	t.Logf("restarted and Ready %s after the API server was back", time.Since(returned).Round(10*time.Millisecond))
	// The API keeps whole seconds.
	g.Expect(managerStatus(restarted).LastTerminationState.Terminated.FinishedAt.Time).NotTo(BeTemporally("<", starting.Truncate(time.Second)), "exited after the API server started again")
	previous, err := podLog(ctx, pod.Name, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logHas(previous, harness.All(harness.Message("FeatureGate changed; requesting shutdown"), harness.KeyContains("diff", "TechPreviewNoUpgrade")))).To(BeTrue())
	g.Expect(cluster.Process("kubelet").Log.Index("Probe failed for http://"+pod.Status.PodIP+":8081/healthz")).To(Equal(-1), "a liveness probe failed")
	g.Consistently(func() (int32, error) {
		p, err := getPod(ctx, pod.Name)
		return managerStatus(p).RestartCount, err
	}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Equal(int32(1)))
}

// probe GETs a health path on the pod's probe port, as the kubelet does:
// the status code, 0 when there is no answer.
func probe(ctx context.Context, podIP, path string) (int, error) {
	// As long as the shipped liveness probe waits: what these checks judge
	// is the answer, and one slow answer on a loaded node is not a wrong
	// one.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:8081%s", podIP, path), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

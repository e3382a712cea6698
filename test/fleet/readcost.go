package fleet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// ReadCost is what one kind of read costs etcd and kube-apiserver, each,
// sent one after another on one kept-alive connection: the floor of what a
// freshness proof made of that read can cost (issue 32's busy target needs
// 0.56 ms of both together per read at one read a second per replica).
type ReadCost struct {
	Name  string `json:"name"`
	Proof bool   `json:"proof"` // whether the read proves anything (a quorum read)
	Reads int    `json:"reads"`
	// Etcd and APIServer are each server's CPU over the reads, the
	// servers' idle rate over the same time taken off.
	Etcd      time.Duration `json:"etcd"`
	APIServer time.Duration `json:"apiServer"`
	Wall      time.Duration `json:"wall"`
}

// PerRead is both servers' CPU per read.
func (r ReadCost) PerRead() time.Duration {
	if r.Reads == 0 {
		return 0
	}
	return (r.Etcd + r.APIServer) / time.Duration(r.Reads)
}

// readKind is one read the guard's proof could be made of.
type readKind struct {
	name  string
	proof bool
	read  func(ctx context.Context, c client.Client) error
}

var readKinds = []readKind{
	{"FeatureGate, consistent GET (the guard's proof until 2026-12-05)", true, func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Name: fgName}, &configv1.FeatureGate{})
	}},
	{"FeatureGate, consistent GET of its metadata only", true, func(ctx context.Context, c client.Client) error {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(configv1.GroupVersion.WithKind("FeatureGate"))
		return c.Get(ctx, client.ObjectKey{Name: fgName}, m)
	}},
	{"FeatureGate, consistent LIST by name (the guard's proof since 2026-12-05; kube-apiserver serves it from its watch cache once that caught up with etcd's revision)", true, func(ctx context.Context, c client.Client) error {
		return c.List(ctx, &configv1.FeatureGateList{}, client.MatchingFields{"metadata.name": fgName})
	}},
	{"Namespace default, consistent GET (a small built-in object)", true, func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
	}},
	{"FeatureGate, GET from the watch cache (resourceVersion 0: proves nothing)", false, func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Name: fgName}, &configv1.FeatureGate{},
			&client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
	}},
}

// ReadCosts measures each readKind: rounds rounds of reads reads each,
// interleaved so that a drift of the machine falls on every kind alike.
// Nothing else may run on the control plane meanwhile.
func (f *Fleet) ReadCosts(ctx context.Context, rounds, reads int) ([]ReadCost, error) {
	etcd, apiserver, err := f.serverPIDs()
	if err != nil {
		return nil, err
	}
	// Unthrottled: the wall time per read is then the servers', not a
	// client rate limiter's.
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.QPS = -1
	c, err := harness.NewClient(cfg, 10*time.Second)
	if err != nil {
		return nil, err
	}
	// The idle rate of each, to take off each measurement.
	idleFor := 5 * time.Second
	e0, a0 := harness.CPUOf([]int{etcd}), harness.CPUOf([]int{apiserver})
	if err := harness.Wait(ctx, idleFor); err != nil {
		return nil, err
	}
	etcdIdle := float64(harness.CPUOf([]int{etcd})-e0) / float64(idleFor)
	apiIdle := float64(harness.CPUOf([]int{apiserver})-a0) / float64(idleFor)

	out := make([]ReadCost, len(readKinds))
	for i, k := range readKinds {
		out[i] = ReadCost{Name: k.name, Proof: k.proof}
		// A first read warms the connection and the server's paths.
		if err := k.read(ctx, c); err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
	}
	for range rounds {
		for i, k := range readKinds {
			start, e0, a0 := time.Now(), harness.CPUOf([]int{etcd}), harness.CPUOf([]int{apiserver})
			for range reads {
				if err := k.read(ctx, c); err != nil {
					return nil, fmt.Errorf("%s: %w", k.name, err)
				}
			}
			r := &out[i]
			r.Reads += reads
			r.Wall += time.Since(start)
			r.Etcd += harness.CPUOf([]int{etcd}) - e0
			r.APIServer += harness.CPUOf([]int{apiserver}) - a0
		}
	}
	// The idle rates taken off once, over each kind's whole time: /proc
	// counts in 10 ms ticks, which one round's clamp would bias.
	for i := range out {
		r := &out[i]
		r.Etcd = max(r.Etcd-time.Duration(etcdIdle*float64(r.Wall)), 0)
		r.APIServer = max(r.APIServer-time.Duration(apiIdle*float64(r.Wall)), 0)
	}
	return out, nil
}

// serverPIDs tells the control plane's etcd from its kube-apiserver: both
// name etcd's URL on their command lines, only the API server as
// --etcd-servers.
func (f *Fleet) serverPIDs() (etcd, apiserver int, err error) {
	pids := harness.PIDsMatching(f.cp.EtcdURL().Host)
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), "--etcd-servers") {
			apiserver = pid
		} else {
			etcd = pid
		}
	}
	if etcd == 0 || apiserver == 0 || len(pids) != 2 {
		return 0, 0, fmt.Errorf("etcd and kube-apiserver by their etcd URL %s: found pids %v", f.cp.EtcdURL().Host, pids)
	}
	return etcd, apiserver, nil
}

// readCostTable is ReadCosts as Markdown, with what 180 replicas reading
// once a second would cost.
func readCostTable(rs []ReadCost) string {
	var b strings.Builder
	b.WriteString("| read | proves | reads | etcd CPU per read | kube-apiserver CPU per read | both | wall per read | cores at 180 reads/s |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Reads == 0 {
			continue
		}
		n := time.Duration(r.Reads)
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %.3f |\n", r.Name, map[bool]string{true: "yes", false: "no"}[r.Proof], r.Reads,
			millis(r.Etcd/n), millis(r.APIServer/n), millis(r.PerRead()), millis(r.Wall/n), r.PerRead().Seconds()*replicas)
	}
	return b.String()
}

// millis is d in milliseconds with two decimals.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

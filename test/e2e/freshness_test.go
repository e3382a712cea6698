package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/faultproxy"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The freshness deadline (issue 25): a fault that leaves the guard's
// connection open but silent (a dead link, a frozen API server, one cut off
// from etcd) must not leave it vouching. Each test runs the operator and
// examples/consumer, whose /decide asks Current for every request and is
// polled every 10 ms, and fails on:
//   - a "go" (a 200 from /decide) later than goAfterFault after the fault
//     started;
//   - a decision on the old feature set later than the bound after the
//     change;
//   - a change not detected within detectAfterHeal of the fault healing;
//   - a process that does not end as it should: exit 0 on the change, or
//     current again within detectAfterHeal when nothing changed.
const (
	freshnessBound  = 2 * time.Second
	goAfterFault    = 2500 * time.Millisecond
	detectAfterHeal = time.Second
	// faultFor is how long each fault lasts: longer than the bound, well
	// short of client-go's own 45 s connection health check.
	faultFor = 6 * time.Second
	// changeAfter is when, after the fault started, the FeatureGate is
	// changed through a path the fault does not touch.
	changeAfter = 2 * time.Second
)

var (
	logLapsed = harness.Message("FeatureGate not proven current within the freshness bound; not current")
	// logDetected is the line that reports a change, whichever was logged:
	// "FeatureGate changed; requesting shutdown", or, for the consumer
	// (which consumes the feature set) when the spec write reaches it
	// before its entry's rewrite, the variant that holds the exit until
	// the rewrite. Both carry detectedBy.
	logDetected = harness.HasKey("detectedBy")
	logProven   = harness.Message("FeatureGate proven current again")
)

// decision is one answer of the consumer's /decide. at is when the request
// was sent: the decision was made after it (and at most the poller's
// timeout later), so a rule broken at at is broken whatever the machine's
// load did to the answer's trip back.
type decision struct {
	at         time.Time
	status     int // 0: no answer
	featureSet string
}

// decisions polls /decide every 10 ms until the test ends.
type decisions struct {
	mu   sync.Mutex
	list []decision
}

func pollDecisions(t *testing.T, addr string) *decisions {
	t.Helper()
	ds := &decisions{}
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			d := decision{at: time.Now()}
			if resp, err := hc.Get("http://" + addr + "/decide"); err == nil {
				d.status = resp.StatusCode
				var body struct {
					FeatureSet string `json:"featureSet"`
				}
				if resp.StatusCode == http.StatusOK {
					_ = json.NewDecoder(resp.Body).Decode(&body)
				}
				_ = resp.Body.Close()
				d.featureSet = body.FeatureSet
			}
			ds.mu.Lock()
			ds.list = append(ds.list, d)
			ds.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return ds
}

// goes are the 200 answers that arrived after from.
func (ds *decisions) goes(from time.Time) []decision {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []decision
	for _, d := range ds.list {
		if d.status == http.StatusOK && d.at.After(from) {
			out = append(out, d)
		}
	}
	return out
}

// goNow reports whether the last answer was a 200.
func (ds *decisions) goNow() bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return len(ds.list) > 0 && ds.list[len(ds.list)-1].status == http.StatusOK
}

// subjects are the operator and the consumer, both reaching the API server
// through one kubeconfig, and the consumer's decisions.
type subjects struct {
	op, consumer *harness.Process
	decisions    *decisions
}

func startSubjects(t *testing.T, kubeconfig string) subjects {
	t.Helper()
	g := NewWithT(t)
	decide := harness.FreeAddr(t)
	s := subjects{
		consumer: harness.StartT(t, consumerOptions(t, "consumer", buildConsumer(t), kubeconfig, "--decide-bind-address="+decide)),
		op:       startOperator(t, "operator", kubeconfig, "--featuregate-freshness-bound="+freshnessBound.String()),
	}
	g.Eventually(s.op.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Eventually(s.consumer.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	s.decisions = pollDecisions(t, decide)
	g.Eventually(s.decisions.goNow).WithTimeout(readyTimeout).Should(BeTrue(), "the consumer decides")
	g.Consistently(s.decisions.goNow).WithTimeout(2*time.Second).WithPolling(10*time.Millisecond).Should(BeTrue(),
		"no lapse before the fault")
	return s
}

// running reports whether both still run.
func (s subjects) running() bool { return s.op.Running() && s.consumer.Running() }

// faultStarted checks the first rule: no "go" later than goAfterFault
// after the fault started at and before until (the fault's end, or when
// another way to vouch opened), and the lapse logged by both with a
// reason. Call it once the fault has lasted longer than goAfterFault.
func (s subjects) faultStarted(t *testing.T, g Gomega, at, until time.Time) {
	t.Helper()
	for _, d := range s.decisions.goes(at.Add(goAfterFault)) {
		g.Expect(d.at.After(until)).To(BeTrue(), "the consumer still said go %s after the fault started", d.at.Sub(at))
	}
	// The consumer's: the operator, idle, asks nothing of Current, and a
	// guard proves only while asked (its decisions are the operator's
	// applies, checked by the controllers' and robustness tests).
	for _, p := range []*harness.Process{s.consumer} {
		var l harness.Line
		g.Eventually(func() bool {
			for _, l = range p.Log.Lines() {
				if logLapsed.Matches(l) && l.At().After(at) {
					return true
				}
			}
			return false
		}).WithTimeout(10*time.Second).Should(BeTrue(), "%s logged no lapse", p.Name)
		g.Expect(l.At().Sub(at)).To(BeNumerically("<=", goAfterFault), "%s: lapse logged %s after the fault started", p.Name, l.At().Sub(at))
		g.Expect(l.Get("reason")).NotTo(BeEmpty())
		t.Logf("%s: lapsed %dms after the fault started: %s", p.Name, l.At().Sub(at).Milliseconds(), l.Get("reason"))
	}
}

// noStaleDecision checks the second rule: no decision on the old feature
// set later than the bound after the change, per request or per reconcile.
func (s subjects) noStaleDecision(t *testing.T, g Gomega, old string, changed time.Time) {
	t.Helper()
	for _, d := range s.decisions.goes(changed.Add(freshnessBound)) {
		g.Expect(d.featureSet).NotTo(Equal(old), "decided on %s %s after the change", old, d.at.Sub(changed))
	}
	for _, l := range s.consumer.Log.Lines() {
		if harness.Message(msgActed).Matches(l) && l.Get("featureSet") == old && l.At().After(changed.Add(freshnessBound)) {
			g.Expect(l.Raw).To(BeEmpty(), "acted on %s %s after the change", old, l.At().Sub(changed))
		}
	}
}

// exitOnChange checks that both detect the change within detectAfterHeal
// of healed (or before it) and exit 0.
func (s subjects) exitOnChange(t *testing.T, g Gomega, healed time.Time) {
	t.Helper()
	for _, p := range []*harness.Process{s.op, s.consumer} {
		g.Expect(p.WaitExit(exitTimeout)).To(Equal(0), "%s", p.Name)
		l, ok := p.Log.Find(logDetected)
		g.Expect(ok).To(BeTrue(), "%s logged no change", p.Name)
		g.Expect(l.At().Sub(healed)).To(BeNumerically("<=", detectAfterHeal), "%s detected the change %s after the fault healed", p.Name, l.At().Sub(healed))
		t.Logf("%s: change detected by %s %dms after the fault healed", p.Name, l.Get("detectedBy"), l.At().Sub(healed).Milliseconds())
		g.Expect(errorLines(p.Log)).To(BeEmpty(), "%s", p.Name)
	}
}

// currentAgain checks that, nothing having changed, the consumer says go
// again within detectAfterHeal of healed and logs it; nobody exits.
func (s subjects) currentAgain(t *testing.T, g Gomega, healed time.Time) {
	t.Helper()
	g.Eventually(func() []decision { return s.decisions.goes(healed) }).WithTimeout(detectAfterHeal).WithPolling(10*time.Millisecond).
		ShouldNot(BeEmpty(), "not current within %s of the fault healing", detectAfterHeal)
	t.Logf("consumer: go again %dms after the fault healed", s.decisions.goes(healed)[0].at.Sub(healed).Milliseconds())
	g.Eventually(func() bool { _, ok := s.consumer.Log.Find(logProven); return ok }).WithTimeout(detectAfterHeal).Should(BeTrue(), "consumer")
	for _, p := range []*harness.Process{s.op, s.consumer} {
		g.Expect(p.Running()).To(BeTrue(), "%s stopped though nothing changed", p.Name)
	}
}

// changeDuring runs the scenario the fault tests share: start the fault,
// change the feature set through change (a path the fault does not touch)
// changeAfter into it, hold the fault for faultFor in all, check the first
// rule, heal, and check that both exit 0 on the change and made no stale
// decision.
func (s subjects) changeDuring(t *testing.T, g Gomega, start func() (heal func()), change func() time.Time, why string) {
	t.Helper()
	heal := start()
	began := time.Now()
	g.Consistently(s.running).WithTimeout(changeAfter).Should(BeTrue())
	changed := change()
	g.Consistently(s.running).WithTimeout(faultFor-changeAfter).Should(BeTrue(), "the change cannot be read "+why)
	s.faultStarted(t, g, began, time.Now())
	heal()
	s.exitOnChange(t, g, time.Now())
	s.noStaleDecision(t, g, "Default", changed)
}

// twinBehindLink starts a second API server on cp's etcd that reaches etcd
// through a fault proxy, and returns an admin configuration for it and the
// proxy; it stops before the proxy closes.
func twinBehindLink(t *testing.T, cp *controlplane.ControlPlane) (*rest.Config, *faultproxy.Proxy) {
	t.Helper()
	etcdLink := faultproxy.Start(t, cp.EtcdURL().Host)
	twin, err := cp.SecondAPIServerOn(&url.URL{Scheme: "http", Host: etcdLink.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := twin.Stop(); err != nil {
			t.Error(err)
		}
	})
	return twin.Config, etcdLink
}

// viaProxy is cfg reaching the API server through addr.
func viaProxy(cfg *rest.Config, addr string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + addr
	return c
}

func hostOf(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// freeze stops the kube-apiserver serving cfg with SIGSTOP (the kernel
// still accepts its connections; nothing answers) and returns what thaws
// it; the test's end thaws it too.
func freeze(t *testing.T, cfg *rest.Config) (thaw func()) {
	t.Helper()
	pid, err := controlplane.APIServerPID(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// toTechPreview changes the feature set through c, the fault's bystander,
// and then rewrites the consumer's status entry for it as
// cluster-config-operator would: the consumer, which consumes the feature
// set, stops once the entry caught up.
func toTechPreview(t *testing.T, c client.Client) time.Time {
	t.Helper()
	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fg := &configv1.FeatureGate{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: "cluster"}, fg); err != nil {
			return err
		}
		for i := range fg.Status.FeatureGates {
			if e := &fg.Status.FeatureGates[i]; e.Version == consumerVersion {
				e.Enabled = append(e.Enabled, configv1.FeatureGateAttributes{Name: "TechPreviewOnlyGate"})
			}
		}
		return c.Status().Update(t.Context(), fg)
	})
	if err != nil {
		t.Fatalf("rewrite the consumer's status entry: %v", err)
	}
	return changed
}

// (a) A silent link: a proxy between the processes and the API server holds
// every byte and closes nothing. With nothing changed, both are current
// again within a second of the link returning; with a change made through
// another path during a second hold, both exit 0 on it once it returns.
func TestFaultSilentLink(t *testing.T) {
	f := startFault(t, "FreshnessSilentLink")
	g := NewWithT(t)
	cp, c := startConsumerCluster(t, true)
	link := faultproxy.Start(t, hostOf(t, cp.Config))
	s := startSubjects(t, harness.Kubeconfig(t, viaProxy(cp.Config, link.Addr())))

	link.Hold()
	held := time.Now()
	g.Consistently(s.running).WithTimeout(faultFor).Should(BeTrue(), "nothing changed: nobody stops")
	s.faultStarted(t, g, held, time.Now())
	link.Release()
	s.currentAgain(t, g, time.Now())

	s.changeDuring(t, g, func() func() { link.Hold(); return link.Release }, func() time.Time { return toTechPreview(t, c) }, "through the silent link")
	f.Detail("link held %s twice: no go after %s; current again after the first, exit 0 on the change after the second", faultFor, goAfterFault)
}

// (b) The API server the processes use is frozen (SIGSTOP); the change is
// made through a second API server on the same etcd.
func TestFaultFrozenAPIServer(t *testing.T) {
	f := startFault(t, "FreshnessFrozenAPIServer")
	g := NewWithT(t)
	cp, _ := startConsumerCluster(t, true)
	other, err := cp.SecondAPIServer()
	g.Expect(err).NotTo(HaveOccurred())
	s := startSubjects(t, harness.Kubeconfig(t, cp.Config))

	s.changeDuring(t, g, func() func() { return freeze(t, cp.Config) }, func() time.Time { return toTechPreview(t, harness.Client(t, other)) }, "through the frozen API server")
	f.Detail("API server frozen %s, changed through another: no go after %s, exit 0 on the change after SIGCONT", faultFor, goAfterFault)
}

// (c) The API server the processes use is cut off from etcd (a proxy
// between them holds every byte) and keeps answering; the change is made
// through an API server that still reaches etcd.
func TestFaultAPIServerCutFromEtcd(t *testing.T) {
	f := startFault(t, "FreshnessAPIServerCutFromEtcd")
	g := NewWithT(t)
	cp, c := startConsumerCluster(t, true)
	cutOff, etcdLink := twinBehindLink(t, cp)
	s := startSubjects(t, harness.Kubeconfig(t, cutOff))

	t.Cleanup(etcdLink.Release) // before the API server behind it stops
	s.changeDuring(t, g, func() func() { etcdLink.Hold(); return etcdLink.Release }, func() time.Time { return toTechPreview(t, c) },
		"through an API server cut from etcd")
	f.Detail("API server cut from etcd %s, changed through another: no go after %s, exit 0 on the change once it reaches etcd again", faultFor, goAfterFault)
}

// (d) Two API servers on one etcd behind a loopback balancer that sends new
// connections to the first one up. The one the processes use fails while
// the other serves; once the balancer's health check marks it down, the
// guard's next read, on a new connection, reaches the healthy one: cut off
// from etcd with nothing changed, it is current again during the fault;
// frozen with a change made through the other, it exits 0 on it before the
// fault heals.
func TestFaultBalancedAPIServers(t *testing.T) {
	// A health check's interval: the balancer notices a failed backend
	// this long after it failed.
	const noticed = 3 * time.Second
	for _, tc := range []struct {
		name   string
		change bool
	}{{"cut from etcd, nothing changed", false}, {"frozen, changed through the other", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFault(t, "FreshnessBalanced/"+map[bool]string{false: "CutNoChange", true: "FrozenChange"}[tc.change])
			g := NewWithT(t)
			cp, c := startConsumerCluster(t, true)
			a, etcdLink := twinBehindLink(t, cp)
			lb := faultproxy.Start(t, hostOf(t, a), hostOf(t, cp.Config))
			s := startSubjects(t, harness.Kubeconfig(t, viaProxy(cp.Config, lb.Addr())))
			g.Expect(lb.Accepted()[1]).To(BeZero(), "every connection on the first API server")

			var heal func()
			if tc.change {
				heal = freeze(t, a)
			} else {
				etcdLink.Hold()
				heal = etcdLink.Release
				t.Cleanup(heal) // before the API server behind it stops
			}
			failed := time.Now()
			var changed time.Time
			if tc.change {
				g.Consistently(s.running).WithTimeout(changeAfter).Should(BeTrue())
				changed = toTechPreview(t, c)
			}
			g.Consistently(s.running).WithTimeout(time.Until(failed.Add(noticed))).Should(BeTrue(), "nothing readable before the balancer moves")
			lb.SetDown(0, true)
			marked := time.Now()
			if tc.change {
				for _, p := range []*harness.Process{s.op, s.consumer} {
					// Exit may wait for the change's Event, which the
					// manager's connection to the frozen server holds up.
					g.Expect(p.WaitExit(exitTimeout)).To(Equal(0), "%s", p.Name)
					l, ok := p.Log.Find(logDetected)
					g.Expect(ok).To(BeTrue(), "%s logged no change", p.Name)
					g.Expect(l.At().Sub(marked)).To(BeNumerically("<", 2*time.Second), "%s: detected after the balancer moved", p.Name)
					t.Logf("%s: change detected %dms after the balancer marked the frozen API server down", p.Name, l.At().Sub(marked).Milliseconds())
				}
				s.faultStarted(t, g, failed, marked)
				s.noStaleDecision(t, g, "Default", changed)
				heal()
				f.Detail("frozen behind a balancer, changed through the other: no go after %s, exit 0 through the other API server before the fault healed", goAfterFault)
				return
			}
			g.Eventually(func() []decision { return s.decisions.goes(marked) }).WithTimeout(3*time.Second).WithPolling(10*time.Millisecond).
				ShouldNot(BeEmpty(), "not current through the healthy API server")
			again := s.decisions.goes(marked)[0].at
			s.faultStarted(t, g, failed, marked)
			g.Expect(lb.Accepted()[1]).To(BeNumerically(">", 0), "a new connection reached the healthy API server")
			heal()
			s.currentAgain(t, g, time.Now())
			g.Consistently(s.decisions.goNow).WithTimeout(2*time.Second).WithPolling(10*time.Millisecond).Should(BeTrue(), "current through the healthy API server")
			f.Detail("cut from etcd behind a balancer: no go after %s, current again %s after the balancer moved, while the fault stood",
				goAfterFault, fmt.Sprintf("%dms", again.Sub(marked).Milliseconds()))
		})
	}
}

// No false alarms: with latency added to every byte both ways (300 ms each
// way, 600 ms a round trip, within the 1 s a read may take under the
// default bound), the guard never stops vouching over a minute.
func TestFaultLatencyIsNoFalseAlarm(t *testing.T) {
	f := startFault(t, "LatencyIsNoFalseAlarm")
	g := NewWithT(t)
	cp, _ := startConsumerCluster(t, true)
	link := faultproxy.Start(t, hostOf(t, cp.Config))
	s := startSubjects(t, harness.Kubeconfig(t, viaProxy(cp.Config, link.Addr())))

	link.Delay(300 * time.Millisecond)
	slowed := time.Now()
	const window = time.Minute
	g.Consistently(s.running).WithTimeout(window).Should(BeTrue())
	var answers, refused int
	s.decisions.mu.Lock()
	for _, d := range s.decisions.list {
		if d.at.After(slowed) {
			answers++
			if d.status != http.StatusOK {
				refused++
			}
		}
	}
	s.decisions.mu.Unlock()
	g.Expect(answers).To(BeNumerically(">", 1000), "the consumer was asked")
	g.Expect(refused).To(BeZero(), "Current false with 600 ms round trips")
	for _, p := range []*harness.Process{s.op, s.consumer} {
		g.Expect(p.Log.CountWhere(logLapsed)).To(BeZero(), "%s lapsed", p.Name)
	}
	f.Detail("300 ms each way for %s: %d decisions, %d refused, no lapse", window, answers, refused)
}

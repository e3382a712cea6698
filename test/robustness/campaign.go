package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/faultproxy"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Config is one campaign.
type Config struct {
	Seed int64
	// EntryRewrite, when positive, is how long after each spec write the
	// campaign rewrites the consumer's status entry, as
	// cluster-config-operator does; zero: never (feature-set changes then
	// hold the consumers' exits until another entry change or the guard's
	// bound).
	EntryRewrite time.Duration
	// Duration is how long traffic and faults last; a quiet tail follows.
	Duration time.Duration
	// Dir receives the history (history.jsonl) and every process's log.
	Dir string
	// Manager and Consumer are the binaries under test.
	Manager, Consumer string
	// Faults, when not empty, restricts the faults to these kinds.
	Faults []string
	// Exposures are run in turn after the random traffic and faults
	// (exposure.go): situations made to happen, not drawn.
	Exposures []string
	// ChangesApart bounds the time between two FeatureGate changes; 2 to
	// 12 s when zero: often enough that faults overlap changes, seldom
	// enough that an operator replica lives to lead and apply between two.
	ChangesApart [2]time.Duration
	// MinApplies, when positive, extends the quiet tail (removals go on in
	// it) until a watch saw that many applies, for at most tailExtension:
	// how many applies a stall-heavy campaign gets depends on the
	// machine's speed, and a rule that judges almost nothing proves almost
	// nothing.
	MinApplies int
	// SettleWithin bounds how long an exposure waits for the consumer to
	// decide on the current value before it begins (a minute when zero).
	// An unpatched consumer settles within seconds; a planted one may
	// never, its bug having shown already, and a minute per exposure was
	// a third of the planted campaigns' time.
	SettleWithin time.Duration
	Rules        Rules
	// Logf reports progress (t.Logf).
	Logf func(format string, args ...any)
}

// Result is what a campaign did and what the checker found.
type Result struct {
	Seed       int64
	History    string
	Events     []Event
	Violations []Violation
	// Bench counts what the campaign tried to do to its bench (changes,
	// faults by kind, heals) and could not; Bench.Broken judges it.
	Bench Bench
	// Writes and Decisions count the FeatureGate writes made and the
	// decisions checked.
	Writes, Decisions int
	// Applied counts the operator's applies a watch saw (rule 2 judges
	// them); Leads the times an operator replica took the lease; Exits the
	// processes' exits (rule 3 judges them).
	Applied, Leads, Exits int
	// Late are the stale applies a fault excused: the residual window.
	Late []Late
	// WorstStaleness is the longest a decision trailed the value it was
	// made on (0 when every decision was on the current value).
	WorstStaleness time.Duration
	// Unsettled counts the exposures before which the consumer did not
	// decide on the current value within a minute.
	Unsettled int
}

// The consumer reads its version's status entry for this gate; the
// operator applies payload objects named after the feature set that
// includes them.
const (
	version   = "4.99.0"
	gate      = "GateA"
	namespace = "robustness"
	settle    = 5 * time.Second
	// tailExtension bounds how long the quiet tail may go on for
	// Config.MinApplies.
	tailExtension = time.Minute
	// etcdMembers is the size of the campaigns' etcd; twinMember is the
	// member the twin, and so every process, reads through.
	etcdMembers, twinMember = 3, 2
)

// payload maps each applied object to the feature set that includes it.
// Three per feature set: each run of the operator's after a removal then
// gives rule 2 three applies to judge.
var payload = map[string]string{
	"only-default":       "Default",
	"only-default-b":     "Default",
	"only-default-c":     "Default",
	"only-techpreview":   "TechPreviewNoUpgrade",
	"only-techpreview-b": "TechPreviewNoUpgrade",
	"only-techpreview-c": "TechPreviewNoUpgrade",
	"only-custom":        "CustomNoUpgrade",
	"only-custom-b":      "CustomNoUpgrade",
	"only-custom-c":      "CustomNoUpgrade",
}

// FaultKinds are the faults a campaign draws from.
var FaultKinds = []string{
	"link-hold", "link-delay", "link-cut", "apiserver-freeze", "apiserver-kill", "apiserver-etcd-cut",
	"etcd-restart", "etcd-partition", "kill-consumer", "kill-operator", "lease-stolen", "pause-consumer", "pause-leader",
}

// pauses stop one of our own processes (SIGSTOP, then SIGCONT): a GC
// pause, a throttled cgroup, between deciding and writing. They last 100 ms
// to 10 s.
var pauses = map[string]bool{"pause-consumer": true, "pause-leader": true}

// stalling faults hold requests in flight: what was sent before them may
// land when they heal.
var stalling = map[string]bool{"link-hold": true, "apiserver-freeze": true, "apiserver-etcd-cut": true,
	// A proposal the partitioned member holds may reach the leader when
	// it heals.
	"etcd-partition": true,
	// A write decided before a pause is sent after it.
	"pause-consumer": true, "pause-leader": true}

// campaign is one run's world.
type campaign struct {
	cfg Config
	// traffic and faults are the seed's two streams of draws, each read
	// by one goroutine: a seed replays the same changes and the same
	// faults, at the same moments, though not what the processes make of
	// them.
	traffic, faults *rand.Rand
	// removals draws when payload objects are deleted (its own stream,
	// so that the changes and faults of a seed stay as they were).
	removals *rand.Rand
	rec      *Recorder
	cp       *controlplane.ControlPlane
	twin     *controlplane.Twin
	link     *faultproxy.Proxy // processes → the twin
	etcd     *faultproxy.Proxy // the twin → etcd
	admin    client.Client     // through the first API server, which no fault but etcd's restart touches
	kube     string            // the processes' kubeconfig

	mu    sync.Mutex
	procs map[string]*supervised
	// leader is the operator replica that last took the lease.
	leader string
	bench  Bench
	active map[string]bool
	// watched counts the applies a watch saw: Result.Applied.
	watched int
	// unsettled counts the exposures whose consumer did not settle first.
	unsettled int
}

// Run runs a campaign and checks its history.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Rules == (Rules{}) {
		cfg.Rules = DefaultRules()
	}
	if cfg.ChangesApart == [2]time.Duration{} {
		cfg.ChangesApart = [2]time.Duration{2 * time.Second, 12 * time.Second}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	kinds := cfg.Faults
	if len(kinds) == 0 {
		kinds = FaultKinds
	}
	c := &campaign{cfg: cfg, traffic: rand.New(rand.NewPCG(uint64(cfg.Seed), 1)), faults: rand.New(rand.NewPCG(uint64(cfg.Seed), 2)),
		removals: rand.New(rand.NewPCG(uint64(cfg.Seed), 3)),
		procs:    map[string]*supervised{}, bench: newBench(), active: map[string]bool{}}
	history := filepath.Join(cfg.Dir, "history.jsonl")
	var err error
	if c.rec, err = NewRecorder(history); err != nil {
		return Result{}, err
	}
	c.rec.Record(Event{Kind: "campaign", Seed: cfg.Seed, Value: strings.Join(kinds, ",")})
	if err := c.setUp(ctx); err != nil {
		c.tearDown()
		_ = c.rec.Close()
		return Result{History: history}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){c.observe, c.pollDecisions, c.pollReadiness, c.removeRepeatedly} {
		wg.Add(1)
		go func() { defer wg.Done(); f(runCtx) }()
	}
	c.startProcesses()
	err = c.drive(ctx, kinds)
	if err == nil {
		err = c.expose(ctx, cfg.Exposures)
	}
	missing := c.missing()
	c.mu.Lock()
	c.bench.Missing = missing
	c.mu.Unlock()
	// The quiet tail: every fault healed, no write, long enough to settle.
	if err == nil {
		err = harness.Wait(ctx, settle+3*time.Second)
	}
	if err == nil && c.watchedApplies() < cfg.MinApplies {
		cfg.Logf("seed %d: %d applies seen; the quiet tail goes on for up to %s until %d", cfg.Seed, c.watchedApplies(), tailExtension, cfg.MinApplies)
		// Not reaching it is no campaign error: the test reports the rule
		// as judged too little.
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, tailExtension, true, func(context.Context) (bool, error) {
			return c.watchedApplies() >= cfg.MinApplies, nil
		})
		err = ctx.Err()
	}
	c.rec.Record(Event{Kind: KindEnd})
	stop()
	wg.Wait()
	c.tearDown()
	closeErr := c.rec.Close()
	res := Result{Seed: cfg.Seed, History: history, Events: c.rec.Events(), Bench: c.benchCounts()}
	res.Violations = Check(res.Events, cfg.Rules)
	res.Late = LateApplies(res.Events, cfg.Rules)
	res.Writes, res.Decisions, res.WorstStaleness = stats(res.Events)
	res.Applied = c.watchedApplies()
	c.mu.Lock()
	res.Unsettled = c.unsettled
	c.mu.Unlock()
	for _, e := range res.Events {
		if e.Kind == KindLeading {
			res.Leads++
		}
		if e.Kind == KindExit {
			res.Exits++
		}
	}
	return res, errors.Join(err, closeErr)
}

func (c *campaign) setUp(ctx context.Context) error {
	crds, err := controlplane.RelaxedCRDs(c.cfg.Dir)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(c.cfg.Dir, "controlplane.log"))
	if err != nil {
		return err
	}
	// etcd is three members: the first API server is attached to the
	// first, the twin, which the processes ask, to the last (through a
	// proxy), which etcd-partition cuts off from the others.
	if c.cp, err = controlplane.Start(controlplane.Options{CRDs: crds, Out: out, Dir: filepath.Join(c.cfg.Dir, "cp"), EtcdMembers: etcdMembers}); err != nil {
		return err
	}
	if c.admin, err = controlplane.NewClient(c.cp.Config); err != nil {
		return err
	}
	member, err := c.cp.EtcdMemberURL(twinMember)
	if err != nil {
		return err
	}
	if c.etcd, err = faultproxy.New(member.Host); err != nil {
		return err
	}
	if c.twin, err = c.cp.SecondAPIServerOn(&url.URL{Scheme: "http", Host: c.etcd.Addr()}); err != nil {
		return err
	}
	u, err := url.Parse(c.twin.Config.Host)
	if err != nil {
		return err
	}
	if c.link, err = faultproxy.New(u.Host); err != nil {
		return err
	}
	via := rest.CopyConfig(c.twin.Config)
	via.Host = "https://" + c.link.Addr()
	c.kube = filepath.Join(c.cfg.Dir, "kubeconfig")
	if err := harness.WriteKubeconfig(c.kube, via); err != nil {
		return err
	}
	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	fg := controlplane.FeatureGate(configv1.Default, controlplane.StatusGates(version, []string{gate}, nil))
	sent := time.Now()
	if err := controlplane.CreateFeatureGate(ctx, c.admin, fg); err != nil {
		return err
	}
	c.rec.Record(Event{Kind: KindWrite, Sent: sent, Value: valueOf(fg), RV: fg.ResourceVersion})
	return writePayload(filepath.Join(c.cfg.Dir, "payload"))
}

// writePayload writes the operator's manifests: one ConfigMap per feature
// set, and one for all.
func writePayload(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(payload))
	for n := range payload {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n    release.openshift.io/feature-set: %s\ndata:\n  featureSet: %s\n", n, namespace, payload[n], payload[n])
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("0000_%02d_%s.yaml", 10+i, n)), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "0000_90_always.yaml"), []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: always\n  namespace: %s\n", namespace)), 0o644)
}

func (c *campaign) tearDown() {
	c.mu.Lock()
	procs := make([]*supervised, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
	if c.etcd != nil {
		c.etcd.Release()
	}
	if c.twin != nil {
		_ = c.twin.Stop()
	}
	if c.link != nil {
		c.link.Close()
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.cp != nil {
		_ = c.cp.Stop()
	}
}

// missing names what is not there once every fault has healed: a server
// whose port refuses connections (an apiserver-kill or etcd-restart whose
// heal gave up after two minutes of failed starts leaves it so) and a
// supervised process whose supervisor gave up (it could not start the
// binary). Nothing brings them back: the rest of the campaign would judge
// a broken bench.
func (c *campaign) missing() []string {
	var out []string
	twin, err := url.Parse(c.twin.Config.Host)
	if err != nil {
		return []string{fmt.Sprintf("kube-apiserver (address %q: %v)", c.twin.Config.Host, err)}
	}
	servers := []struct{ name, addr string }{{"kube-apiserver", twin.Host}}
	for i := range etcdMembers {
		if u, err := c.cp.EtcdMemberURL(i); err == nil {
			servers = append(servers, struct{ name, addr string }{fmt.Sprintf("etcd member %d", i), u.Host})
		}
	}
	for _, s := range servers {
		if !listening(s.addr) {
			out = append(out, s.name)
		}
	}
	c.mu.Lock()
	procs := maps.Clone(c.procs)
	c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		select {
		case <-procs[name].done:
			out = append(out, name)
		default:
		}
	}
	return out
}

// listening is whether addr accepts a TCP connection within a second: a
// server that runs does, even a slow one.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// drive sends traffic and faults until the campaign's duration is over,
// then heals every fault.
func (c *campaign) drive(ctx context.Context, kinds []string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if harness.Wait(ctx, between(c.traffic, c.cfg.ChangesApart[0], c.cfg.ChangesApart[1])) != nil {
				return
			}
			c.changeCounted(ctx)
		}
	}()

	for ctx.Err() == nil {
		if harness.Wait(ctx, between(c.faults, time.Second, 5*time.Second)) != nil {
			break
		}
		kind := kinds[c.faults.IntN(len(kinds))]
		length := between(c.faults, time.Second, 8*time.Second)
		if pauses[kind] {
			// 1-8 s mapped onto 100 ms-10 s: no draw of its own, so
			// that the faults' stream draws the same for every kind.
			length = 100*time.Millisecond + (length-time.Second)*99/70
		}
		pick := c.faults.IntN(2)
		if c.isActive(kind) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.inject(context.WithoutCancel(ctx), kind, length, pick)
		}()
	}
	wg.Wait()
	return nil
}

func (c *campaign) watchedApplies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watched
}

// removeRepeatedly removes the payload objects every 0.5 to 2 s until the
// campaign ends, its quiet tail included (a removal is no FeatureGate write
// and no fault: the tail's leader applies again, and rule 2 judges it).
func (c *campaign) removeRepeatedly(ctx context.Context) {
	for harness.Wait(ctx, between(c.removals, 500*time.Millisecond, 2*time.Second)) == nil {
		c.removePayload(ctx)
	}
}

// removePayload deletes the payload objects, through the first API server:
// once every object exists a re-apply changes nothing a watch sees, so
// without removals rule 2 would judge only the first few applies. The
// operator's next run (a resync, a restart, a new leader) creates again
// those its snapshot includes.
func (c *campaign) removePayload(ctx context.Context) {
	for name := range payload {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		if err := c.admin.Delete(ctx, cm); err == nil {
			c.rec.Record(Event{Kind: KindRemoved, Object: name})
		}
	}
}

// between draws a duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

func (c *campaign) isActive(kind string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active[kind]
}

// changeCounted writes one change and counts it in the bench, unless the
// campaign's end cut it short: the tail of a campaign is no bench failure.
func (c *campaign) changeCounted(ctx context.Context) {
	err := c.change(ctx)
	if err != nil && ctx.Err() != nil {
		return
	}
	if err != nil {
		c.cfg.Logf("FeatureGate change not written: err=%v", err)
	}
	c.count(func(b *Bench) { b.Changes.add(err) })
}

// count updates the campaign's bench counts, which several goroutines do.
func (c *campaign) count(update func(*Bench)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	update(&c.bench)
}

// benchCounts is a copy of the bench counts, once the campaign's
// goroutines are done.
func (c *campaign) benchCounts() Bench {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := newBench()
	b.merge(c.bench)
	return b
}

// inject runs one fault for length, recording its start and heal, and
// counts whether it was injected and healed.
func (c *campaign) inject(ctx context.Context, kind string, length time.Duration, pick int) {
	c.mu.Lock()
	c.active[kind] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.active, kind)
		c.mu.Unlock()
	}()
	heal := c.begin(ctx, kind, pick)
	_ = harness.Wait(ctx, length)
	c.end(ctx, kind, heal)
}

// begin starts a fault, recording its start and counting whether it was
// injected, and returns what heals it (nil: nothing to heal).
func (c *campaign) begin(ctx context.Context, kind string, pick int) (heal func() error) {
	c.rec.Record(Event{Kind: KindFault, Fault: kind, Phase: PhaseStart, Stalls: stalling[kind]})
	heal, err := c.start(ctx, kind, pick)
	if err != nil {
		c.cfg.Logf("fault not injected: kind=%s err=%v", kind, err)
	}
	c.count(func(b *Bench) { addTo(b.Faults, kind, err) })
	return heal
}

// end heals what begin started, recording the heal (and, for a fault of
// the servers, when the twin serves again) and counting whether it healed.
func (c *campaign) end(ctx context.Context, kind string, heal func() error) {
	if heal == nil {
		c.rec.Record(Event{Kind: KindFault, Fault: kind, Phase: PhaseHeal, Stalls: stalling[kind]})
		return
	}
	err := heal()
	if err != nil {
		c.cfg.Logf("fault not healed: kind=%s err=%v", kind, err)
	}
	c.rec.Record(Event{Kind: KindFault, Fault: kind, Phase: PhaseHeal, Stalls: stalling[kind]})
	if err == nil && ofTheServers[kind] {
		if err = c.servesAgain(ctx); err != nil {
			c.cfg.Logf("fault healed, the API server does not serve: kind=%s err=%v", kind, err)
		} else {
			c.rec.Record(Event{Kind: KindFault, Fault: kind, Phase: PhaseServed})
		}
	}
	c.count(func(b *Bench) { addTo(b.Heals, kind, err) })
}

// ofTheServers are the faults of etcd and the twin, whose heal is over
// once the twin serves again (servesAgain).
var ofTheServers = map[string]bool{"etcd-restart": true, "etcd-partition": true, "apiserver-kill": true,
	"apiserver-etcd-cut": true, "apiserver-freeze": true}

// servesAgain waits, up to servesWithin, until the twin answers a
// consistent read of the FeatureGate (PhaseServed). The world has settled
// once the API server the processes ask serves what they read, not when the
// bench has started again what it stopped: kube-apiserver keeps an etcd
// client per resource, each reconnecting with a backoff of its own, and one
// seen answering the FeatureGate 7 s after etcd was back (every process
// read it in the same millisecond) is the world settling late, not a
// guard. Rule 4 counts its quiet from then; rule 2 still excuses from the
// heal itself.
func (c *campaign) servesAgain(ctx context.Context) error {
	twin, err := controlplane.NewClient(c.twin.Config)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, servesWithin, true, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		last = twin.Get(rctx, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no consistent read of FeatureGate cluster answered within %s: %w", servesWithin, last)
	}
	return nil
}

// servesWithin bounds servesAgain.
const servesWithin = time.Minute

// start begins a fault and returns what heals it.
func (c *campaign) start(ctx context.Context, kind string, pick int) (heal func() error, err error) {
	switch kind {
	case "link-hold":
		c.link.Hold()
		return ok(c.link.Release), nil
	case "link-delay":
		c.link.Delay(300 * time.Millisecond)
		return ok(func() { c.link.Delay(0) }), nil
	case "link-cut":
		c.link.Cut()
		return ok(c.link.Restore), nil
	case "apiserver-etcd-cut":
		c.etcd.Hold()
		return ok(c.etcd.Release), nil
	case "apiserver-freeze", "apiserver-kill":
		pid, err := controlplane.APIServerPID(c.twin.Config)
		if err != nil {
			return nil, err
		}
		if kind == "apiserver-freeze" {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return nil, fmt.Errorf("freeze kube-apiserver %d: %w", pid, err)
			}
			// The heal finds "no such process" when an apiserver-kill
			// overlapping this freeze killed the stopped server (SIGKILL
			// ends a stopped process; the kill's twin.Stop reaps it):
			// nothing is left frozen, and the kill's own heal starts a
			// server under another pid. Benign, unless the API server is
			// missing once every fault healed, which campaign.missing
			// tells (CI's seed 1 heals so).
			return func() error {
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
					return fmt.Errorf("thaw kube-apiserver %d: %w", pid, err)
				}
				return nil
			}, nil
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("kill kube-apiserver %d: %w", pid, err)
		}
		_ = c.twin.Stop() // reaps it
		// As a kubelet would, until it runs: a start can fail while
		// another fault holds its etcd link.
		return func() error { return untilStarted(ctx, c.twin.Stop, c.twin.Start) }, nil
	case "etcd-partition":
		if err := c.cp.PartitionEtcdMember(twinMember); err != nil {
			return nil, err
		}
		return func() error { return c.cp.HealEtcdMember(twinMember) }, nil
	case "etcd-restart":
		if err := c.cp.StopEtcd(); err != nil {
			return nil, fmt.Errorf("stop etcd: %w", err)
		}
		return func() error { return untilStarted(ctx, c.cp.StopEtcd, c.cp.StartEtcd) }, nil
	case "kill-consumer", "kill-operator":
		names := []string{"consumer"}
		if kind == "kill-operator" {
			names = []string{"operator-0", "operator-1"}
		}
		c.mu.Lock()
		p := c.procs[names[pick%len(names)]]
		c.mu.Unlock()
		p.kill()
		return nil, nil
	case "pause-consumer", "pause-leader":
		names := []string{"consumer"}
		if kind == "pause-leader" {
			// The replica that last took the lease; when it is between
			// two lives (a change restarts every replica), the other:
			// whichever runs is the one that may lead next.
			c.mu.Lock()
			leader := c.leader
			c.mu.Unlock()
			if leader == "" {
				return nil, errors.New("no operator replica has led yet")
			}
			names = []string{leader, "operator-0", "operator-1"}
		}
		var name string
		var pid int
		for _, n := range names {
			c.mu.Lock()
			p := c.procs[n]
			c.mu.Unlock()
			if pid = p.pid(); pid != 0 {
				name = n
				break
			}
		}
		if pid == 0 {
			return nil, fmt.Errorf("%s is not running", strings.Join(names, ", "))
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("pause %s %d: %w", name, pid, err)
		}
		return func() error {
			// Gone (a kill overlapping the pause ends a stopped process):
			// nothing is left paused.
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("resume %s %d: %w", name, pid, err)
			}
			return nil
		}, nil
	case "lease-stolen":
		l := &coordinationv1.Lease{}
		if err := c.admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaseName}, l); err != nil {
			return nil, fmt.Errorf("read the lease: %w", err)
		}
		thief := "robustness-thief"
		l.Spec.HolderIdentity = &thief
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		if err := c.admin.Update(ctx, l); err != nil {
			return nil, fmt.Errorf("steal the lease: %w", err)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown fault %q", kind)
}

func ok(f func()) func() error { return func() error { f(); return nil } }

// untilStarted starts a server again until it runs, stopping what a failed
// start left, for up to two minutes.
func untilStarted(ctx context.Context, stop, start func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := start()
		if err == nil {
			return nil
		}
		_ = stop()
		if harness.Wait(ctx, time.Second) != nil {
			return fmt.Errorf("not started in two minutes: %w", err)
		}
	}
}

// change writes one random change of the FeatureGate through the first API
// server: of every kind the guard compares, and of a kind it must not
// restart for (another version's entry).
func (c *campaign) change(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fg := &configv1.FeatureGate{}
	if err := c.admin.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		return fmt.Errorf("read the FeatureGate: %w", err)
	}
	sets := []configv1.FeatureSet{configv1.Default, configv1.TechPreviewNoUpgrade, configv1.CustomNoUpgrade}
	what := c.traffic.IntN(4)
	set := sets[c.traffic.IntN(len(sets))]
	flipOther := c.traffic.IntN(2) == 0
	status := false
	switch what {
	case 0: // the feature set
		fg.Spec.FeatureSet = set
		fg.Spec.CustomNoUpgrade = nil
		if set == configv1.CustomNoUpgrade {
			fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: []configv1.FeatureGateName{gate}}
		}
	case 1: // the gate in this version's status entry
		status = true
		enabled := !gateEnabled(fg)
		setEntry(fg, version, enabled)
	case 2: // another version's entry: no restart
		status = true
		setEntry(fg, "4.98.0", flipOther)
	default: // the custom lists, when they count
		if fg.Spec.FeatureSet != configv1.CustomNoUpgrade {
			fg.Spec.FeatureSet = configv1.CustomNoUpgrade
		}
		if fg.Spec.CustomNoUpgrade == nil {
			fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{}
		}
		if len(fg.Spec.CustomNoUpgrade.Disabled) == 0 {
			fg.Spec.CustomNoUpgrade.Disabled = []configv1.FeatureGateName{customGate}
		} else {
			fg.Spec.CustomNoUpgrade.Disabled = nil
		}
	}
	return c.commit(ctx, fg, status)
}

// commit writes fg, its status when status is set, else its spec (and
// then, after Config.EntryRewrite, this version's entry as
// cluster-config-operator would), recording each write.
func (c *campaign) commit(ctx context.Context, fg *configv1.FeatureGate, status bool) error {
	sent := time.Now()
	var err error
	if status {
		err = c.admin.Status().Update(ctx, fg)
	} else {
		err = c.admin.Update(ctx, fg)
	}
	if err != nil {
		return fmt.Errorf("write the FeatureGate: %w", err)
	}
	c.rec.Record(Event{Kind: KindWrite, Sent: sent, Value: valueOf(fg), RV: fg.ResourceVersion})
	if status || c.cfg.EntryRewrite <= 0 {
		return nil
	}
	// cluster-config-operator rewrites this version's entry from the spec
	// a moment later: a consumer of the feature set restarts once that
	// entry caught up. The end of the campaign's traffic does not stop
	// it: an entry left behind its spec keeps a feature-set consumer from
	// vouching for its snapshot (for up to two minutes), as in a cluster.
	ctx = context.WithoutCancel(ctx)
	if err := harness.Wait(ctx, c.cfg.EntryRewrite); err != nil {
		return err
	}
	return c.rewriteEntry(ctx, fg.Spec.FeatureSet)
}

// rewriteEntry rewrites this version's entry for set, retrying as
// cluster-config-operator's controller does (for 30 s): an entry left
// behind its spec would leave the next snapshot mixed, and a consumer of
// the feature set holding its exit for a rewrite that never comes.
func (c *campaign) rewriteEntry(ctx context.Context, set configv1.FeatureSet) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var err error
	for {
		fg := &configv1.FeatureGate{}
		if err = c.admin.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err == nil {
			if fg.Spec.FeatureSet != set {
				return nil // changed again since: that change rewrites it
			}
			markEntry(fg, version)
			sent := time.Now()
			if err = c.admin.Status().Update(ctx, fg); err == nil {
				c.rec.Record(Event{Kind: KindWrite, Sent: sent, Value: valueOf(fg), RV: fg.ResourceVersion})
				return nil
			}
		}
		if harness.Wait(ctx, 500*time.Millisecond) != nil {
			return fmt.Errorf("rewrite the status entry as cluster-config-operator would: %w", err)
		}
	}
}

// markEntry rewrites version's entry from the spec, keeping the gate: each
// feature set has its own gate lists, which a marker gate stands for here,
// and the custom lists' disabled gates are disabled in it, so that a change
// of those lists changes the entry as cluster-config-operator's rewrite
// would (a rewrite that changes nothing writes nothing).
func markEntry(fg *configv1.FeatureGate, v string) {
	set := fg.Spec.FeatureSet
	if set == "" {
		set = configv1.Default
	}
	marker := configv1.FeatureGateName("Set" + string(set))
	var customOff []configv1.FeatureGateName
	if set == configv1.CustomNoUpgrade && fg.Spec.CustomNoUpgrade != nil {
		customOff = fg.Spec.CustomNoUpgrade.Disabled
	}
	for i := range fg.Status.FeatureGates {
		d := &fg.Status.FeatureGates[i]
		if d.Version != v {
			continue
		}
		d.Enabled = slices.DeleteFunc(d.Enabled, func(a configv1.FeatureGateAttributes) bool { return strings.HasPrefix(string(a.Name), "Set") })
		d.Enabled = append(d.Enabled, configv1.FeatureGateAttributes{Name: marker})
		d.Disabled = slices.DeleteFunc(d.Disabled, func(a configv1.FeatureGateAttributes) bool { return a.Name == customGate })
		if slices.Contains(customOff, customGate) {
			d.Disabled = append(d.Disabled, configv1.FeatureGateAttributes{Name: customGate})
		}
		return
	}
}

// customGate is the gate the custom lists change.
const customGate configv1.FeatureGateName = "GateC"

// setEntry sets the gate in version's status entry, keeping the others.
func setEntry(fg *configv1.FeatureGate, v string, enabled bool) {
	on, off := []string{gate}, []string{"GateB"}
	if !enabled {
		on, off = off, on
	}
	entry := controlplane.GateDetails(v, on, off)
	for i := range fg.Status.FeatureGates {
		if fg.Status.FeatureGates[i].Version == v {
			fg.Status.FeatureGates[i] = entry
			return
		}
	}
	fg.Status.FeatureGates = append(fg.Status.FeatureGates, entry)
}

func gateEnabled(fg *configv1.FeatureGate) bool {
	for _, d := range fg.Status.FeatureGates {
		if d.Version == version {
			for _, a := range d.Enabled {
				if a.Name == gate {
					return true
				}
			}
		}
	}
	return false
}

// valueOf is the FeatureGate as the consumer's decisions show it: its
// feature set and the gate's state in the consumer's version.
func valueOf(fg *configv1.FeatureGate) string {
	set := string(fg.Spec.FeatureSet)
	if set == "" { // configv1.Default is the empty string
		set = "Default"
	}
	state := "disabled"
	if gateEnabled(fg) {
		state = "enabled"
	}
	return set + "/" + state
}

// observe records every payload object the operator applies, through the
// first API server (no fault but etcd's restart touches it: the watch is
// made again then).
func (c *campaign) observe(ctx context.Context) {
	seen := map[string]string{} // name → resourceVersion
	for ctx.Err() == nil {
		list := &corev1.ConfigMapList{}
		if err := c.admin.List(ctx, list, client.InNamespace(namespace)); err != nil {
			_ = harness.Wait(ctx, 200*time.Millisecond)
			continue
		}
		for _, cm := range list.Items {
			c.applied(seen, &cm, true)
		}
		w, err := c.adminWatch(ctx, list.ResourceVersion)
		if err != nil {
			_ = harness.Wait(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				c.applied(seen, cm, false)
			}
		}
		w.Stop()
	}
}

func (c *campaign) adminWatch(ctx context.Context, rv string) (watch.Interface, error) {
	wc, err := client.NewWithWatch(c.cp.Config, client.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		return nil, err
	}
	// Ended by the server every 30 s: a watch that went quiet (an etcd
	// restart under the API server) is made again from a list.
	timeout := int64(30)
	return wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout}})
}

// applied records a payload object at a resourceVersion not seen before;
// listed when a list, not a watch event, showed it (when it was written is
// then unknown).
func (c *campaign) applied(seen map[string]string, cm *corev1.ConfigMap, listed bool) {
	set, ok := payload[cm.Name]
	if !ok || seen[cm.Name] == cm.ResourceVersion {
		return
	}
	seen[cm.Name] = cm.ResourceVersion
	if !listed {
		c.mu.Lock()
		c.watched++
		c.mu.Unlock()
	}
	c.rec.Record(Event{Kind: KindApplied, Object: cm.Name, Value: set, RV: cm.ResourceVersion, Listed: listed})
}

// pollDecisions asks the consumer's /decide every 20 ms.
func (c *campaign) pollDecisions(ctx context.Context) {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	every(ctx, 20*time.Millisecond, func() {
		c.mu.Lock()
		p := c.procs["consumer"]
		c.mu.Unlock()
		if p == nil || p.decide == "" {
			return
		}
		sent := time.Now()
		resp, err := hc.Get("http://" + p.decide + "/decide")
		if err != nil {
			return // not running: its start and exit are recorded
		}
		code := resp.StatusCode
		var d struct {
			FeatureSet string `json:"featureSet"`
			Enabled    bool   `json:"enabled"`
		}
		if code == http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&d)
		}
		_ = resp.Body.Close()
		e := Event{Kind: KindDecision, Proc: "consumer", Code: &code, Sent: sent}
		if code == http.StatusOK {
			state := "disabled"
			if d.Enabled {
				state = "enabled"
			}
			e.Value = d.FeatureSet + "/" + state
		}
		c.rec.Record(e)
	})
}

// pollReadiness records each process's readiness changes.
func (c *campaign) pollReadiness(ctx context.Context) {
	every(ctx, 100*time.Millisecond, func() {
		c.mu.Lock()
		procs := make([]*supervised, 0, len(c.procs))
		for _, p := range c.procs {
			procs = append(procs, p)
		}
		c.mu.Unlock()
		for _, p := range procs {
			p.pollReady(c.rec)
		}
	})
}

// stats counts writes and decisions, and finds the worst staleness.
func stats(h []Event) (writes, decisions int, worst time.Duration) {
	tl := newTimeline(h)
	for _, e := range h {
		switch e.Kind {
		case KindWrite:
			writes++
		case KindDecision:
			if e.Code == nil || *e.Code != http.StatusOK {
				continue
			}
			decisions++
			if held, _, ok := tl.staleFor(decidedAt(e), func(v string) bool { return v == e.Value }); ok && held > worst {
				worst = held
			}
		}
	}
	return writes, decisions, worst
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}

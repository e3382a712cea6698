package robustness

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

var (
	seedFlag      = flag.Int64("robustness.seed", 0, "Seed of the first campaign; each next one adds 1 (0: from the clock).")
	durationFlag  = flag.Duration("robustness.duration", 40*time.Second, "How long each campaign's traffic and faults last.")
	campaignsFlag = flag.Int("robustness.campaigns", 2, "How many campaigns TestCampaigns runs.")
	faultsFlag    = flag.String("robustness.faults", "", "Comma-separated fault kinds to draw from (empty: all).")
	reportFlag    = flag.String("robustness.report", "", "Write the campaigns' table (Markdown) to this file.")
	keepFlag      = flag.Bool("robustness.keep", false, "Keep each campaign's directory (history and logs) even when it passes.")
	exposeFlag    = flag.String("robustness.exposures", strings.Join(AllExposures, ","), "Comma-separated exposures each campaign of TestCampaigns runs after its random part (empty: none).")
	plantedSeeds  = flag.Int("robustness.planted-seeds", 5, "How many seeds each planted bug is run with (its own seed, then the next ones).")
	plantedLength = flag.Duration("robustness.planted-duration", 5*time.Second, "How long each planted bug's campaign's random traffic and faults last, before its exposure.")
)

var bins struct{ manager, consumer, root string }

func TestMain(m *testing.M) {
	flag.Parse()
	// The processes' logs are the story; the harness's own clients say
	// nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv("FEATUREGATE_ROBUSTNESS") == "" {
		// The checker's and the bench rule's unit tests need no binary:
		// they run (make test); the campaigns skip.
		fmt.Println("robustness: campaigns skipped (make test-robustness or make robustness runs them)")
		os.Exit(m.Run())
	}
	os.Exit(harness.RunWithManager(m, "robustness", func(b *harness.Built) {
		bins.manager, bins.root = b.Manager, b.Root
		bins.consumer = filepath.Join(filepath.Dir(b.Manager), "consumer")
		if err := buildConsumer(b.Root, bins.consumer, nil); err != nil {
			fmt.Fprintln(os.Stderr, "robustness:", err)
			os.Exit(1)
		}
	}))
}

// buildConsumer builds examples/consumer into out, with the files of
// overlay (go build -overlay: path in the checkout → replacement) in place
// of the checkout's.
func buildConsumer(root, out string, overlay map[string]string) error {
	args := []string{"build", "-o", out}
	if len(overlay) > 0 {
		data, err := json.Marshal(map[string]any{"Replace": overlay})
		if err != nil {
			return err
		}
		path := out + ".overlay.json"
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		args = append(args, "-overlay", path)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = filepath.Join(root, "examples", "consumer")
	if outp, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build examples/consumer: %w\n%s", err, outp)
	}
	return nil
}

// needBinaries skips a test that runs campaigns when TestMain built no
// binaries (FEATUREGATE_ROBUSTNESS unset).
func needBinaries(t *testing.T) {
	t.Helper()
	if bins.manager == "" {
		t.Skip("campaigns run under make test-robustness or make robustness (FEATUREGATE_ROBUSTNESS=1)")
	}
}

// campaignDir is a campaign's directory, removed when it passed unless
// -robustness.keep.
func campaignDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "robustness-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *keepFlag {
			t.Logf("campaign kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

func exposuresOf(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

func faultKinds() []string {
	if *faultsFlag == "" {
		return nil
	}
	return strings.Split(*faultsFlag, ",")
}

// Seeded campaigns of random traffic and random, overlapping faults; each
// history must keep every rule of the checker.
func TestCampaigns(t *testing.T) {
	needBinaries(t)
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	var results []Result
	started := time.Now()
	for i := range *campaignsFlag {
		s := seed + int64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), *durationFlag+3*time.Minute)
			defer cancel()
			res, err := Run(ctx, Config{Seed: s, Duration: *durationFlag, Dir: campaignDir(t, fmt.Sprint(s)), EntryRewrite: time.Second, MinApplies: minApplies,
				Manager: bins.manager, Consumer: bins.consumer, Faults: faultKinds(), Exposures: exposuresOf(*exposeFlag), Logf: t.Logf})
			if err != nil {
				t.Fatalf("campaign: %v", err)
			}
			results = append(results, res)
			broken := res.Bench.Broken()
			t.Logf("seed %d: %d writes (%d changes tried, %d not made), %d decisions checked, %d applies judged (%d leases taken), %d exits judged, faults %s, worst staleness %s, bench %s",
				s, res.Writes, res.Bench.Changes.Tried, res.Bench.Changes.Failed, res.Decisions, res.Applied, res.Leads, res.Exits,
				res.Bench.FaultCounts(), res.WorstStaleness.Round(time.Millisecond), health(broken))
			for _, l := range res.Late {
				t.Logf("seed %d: late apply (excused by %s): %s %s after the heal, its feature set gone for %s", s, l.Fault, l.Object,
					l.After.Round(time.Millisecond), l.Held.Round(time.Millisecond))
			}
			for _, e := range res.Bench.FirstErrors() {
				t.Logf("seed %d: first error: %s", s, e)
			}
			for _, v := range res.Violations {
				t.Errorf("%s", v)
			}
			for _, why := range broken {
				t.Errorf("bench broken: %s", why)
			}
			for _, why := range unjudged(res) {
				t.Errorf("a rule judged too little: %s", why)
			}
			if res.Unsettled > 0 {
				t.Errorf("%d exposures began with a consumer that did not decide on the current value within %s", res.Unsettled, settleWithin)
			}
			if len(res.Violations) > 0 || len(broken) > 0 {
				t.Errorf("replay: make robustness SEED=%d DURATION=%s%s (history: %s)", s, *durationFlag, faultsArg(), res.History)
			}
		})
	}
	if *reportFlag != "" {
		if err := os.WriteFile(*reportFlag, []byte(reportOf(results, time.Since(started), seed)), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// minApplies is how many applies rule 2 must judge in a campaign: a rule
// that judges almost nothing proves almost nothing.
const minApplies = 20

// unjudged says which rules a campaign gave too little to judge: rule 1
// no decision, rule 2 fewer than minApplies applies, rule 3 no exit.
// (Rule 4's window, the quiet tail, is in every campaign.)
func unjudged(res Result) []string {
	var out []string
	if res.Decisions == 0 {
		out = append(out, "no decision checked (rule 1)")
	}
	if res.Applied < minApplies {
		out = append(out, fmt.Sprintf("%d applies judged, fewer than %d (rule 2)", res.Applied, minApplies))
	}
	if res.Exits == 0 {
		out = append(out, "no exit judged (rule 3)")
	}
	return out
}

// health is the bench's health in a word: "ok", or "broken" (the reasons
// are reported as errors).
func health(broken []string) string {
	if len(broken) > 0 {
		return "broken"
	}
	return "ok"
}

func faultsArg() string {
	if *faultsFlag == "" {
		return ""
	}
	return " ROBUSTNESS_FAULTS=" + *faultsFlag
}

// plantedBug is a known way to break the guard's promise, planted at build
// time (examples/consumer built with an overlay of one file of
// pkg/featuregate), and a campaign the checker must fail on it.
type plantedBug struct {
	name string
	// file is the file of pkg/featuregate patched; patches replace, once
	// each, what they name.
	file    string
	patches map[string]string
	faults  []string
	apart   [2]time.Duration
	// seed is the first of its seeds (-robustness.planted-seeds).
	seed int64
	rule string
	// exposure is the situation that shows the bug, run after the random
	// part whatever it drew: the catch is by construction, not by luck.
	exposure string
	// entryRewrite is Config.EntryRewrite.
	entryRewrite time.Duration
}

// plantedBugs are five different ways to break the promise, each caught
// at every one of its seeds (in CI at the first); RELIABILITY.md keeps the
// table.
var plantedBugs = []plantedBug{{
	// The freshness deadline removed: the prover never runs and the
	// monitor vouches whatever its quiet watch says (the seed bug's trust
	// in a quiet watch). Silent links, changes every 0.5 to 2 s, so that
	// holds overlap changes.
	name: "no freshness deadline", file: "monitor.go",
	patches: map[string]string{
		"func (m *monitor) Current() bool {\n\tnow := time.Now()": "func (m *monitor) Current() bool {\n\tif true {\n\t\treturn true\n\t}\n\tnow := time.Now()",
		"if err := m.prover.run(ctx); ctx.Err() == nil {":         "<-ctx.Done()\n\t\tif err := error(nil); ctx.Err() == nil {",
	},
	faults: []string{"link-hold"}, apart: [2]time.Duration{500 * time.Millisecond, 2 * time.Second}, seed: 7, rule: RuleStaleDecision,
	// The entry rewritten, so that the consumer is not left waiting for it
	// (a feature-set consumer vouches for no snapshot whose entry is older
	// than its spec) when the exposure begins.
	entryRewrite: time.Second, exposure: ExposeSilentChange,
}, {
	// The seed's own bug: a startup read that fails is taken for an empty
	// FeatureGate (Default, no gates) instead of retried. Links cut and the
	// consumer killed; the exposure restarts it while the API refuses it
	// after the feature set left Default. Its freshness proof then mostly
	// keeps /decide from answering on the snapshot (the monitor's first
	// read, right after the heal, stops the process), so rule 1 saw it only
	// when the machine was slow enough; rule 5 judges the snapshot itself,
	// whatever the speed.
	name: "Default assumed when the startup read fails", file: "startup.go",
	patches: map[string]string{
		"snap, err := s.readOnce(ctx, started, attemptLimit, attempt > 1)\n\t\tif err == nil {": "snap, err := s.readOnce(ctx, started, attemptLimit, attempt > 1)\n\t\tif err != nil && ctx.Err() == nil {\n\t\t\tsnap, err = Read(&configv1.FeatureGate{}, \"\")\n\t\t}\n\t\tif err == nil {",
	},
	faults: []string{"link-cut", "kill-consumer"}, apart: [2]time.Duration{time.Second, 4 * time.Second}, seed: 3, rule: RuleUnread,
	entryRewrite: time.Second, exposure: ExposeStartDuringCut,
}, {
	// A comparison that misses gate changes: only a new feature set counts,
	// so a gate flipped in the status entry leaves the process deciding on
	// the old state while it vouches for it.
	name: "gate changes not compared", file: "consumed.go",
	patches: map[string]string{
		"func diff(snapshot, live Snapshot, c consumed) changes {\n\tvar out changes": "func diff(snapshot, live Snapshot, c consumed) changes {\n\tvar out changes\n\tif snapshot.featureSet == live.featureSet {\n\t\treturn out\n\t}",
	},
	faults: []string{"link-delay"}, apart: [2]time.Duration{time.Second, 4 * time.Second}, seed: 5, rule: RuleStaleDecision,
	entryRewrite: time.Second, exposure: ExposeGateFlip,
}, {
	// A proof that proves nothing: the read lists at resourceVersion 0,
	// which the API server answers from its watch cache. Every fault of
	// the link still lapses it; only an API server whose etcd member is
	// cut off from the quorum, fed nothing and answering anyway, shows
	// the bug (Chubby's jeopardy).
	name: "freshness proven from the watch cache", file: "apisource.go",
	patches: map[string]string{
		`VersionedParams(&metav1.ListOptions{FieldSelector: a.selector()}`: `VersionedParams(&metav1.ListOptions{FieldSelector: a.selector(), ResourceVersion: "0"}`,
	},
	faults: []string{"etcd-partition"}, apart: [2]time.Duration{time.Second, 4 * time.Second}, seed: 11, rule: RuleStaleDecision,
	entryRewrite: time.Second, exposure: ExposePartitionedChange,
}, {
	// A lapse taken for the end: the monitor gives up instead of reading
	// again, so the process never decides on anything after its first
	// lapse. Safe, and useless: no stale decision, no exit; only rule 4
	// (settled by 5 s after the last fault) sees it, and only when no
	// change restarted the process since its lapse: changes 15 to 30 s
	// apart. The unpatched consumer passes the same campaign.
	name: "no recovery after a lapse", file: "monitor.go",
	patches: map[string]string{
		"lost = true\n\t\t\tm.reconnect() // logged by the prover": "return nil // gives up: Current stays false",
	},
	faults: []string{"link-hold"}, apart: [2]time.Duration{15 * time.Second, 30 * time.Second}, seed: 13, rule: RuleSettled,
	entryRewrite: time.Second, exposure: ExposeLapse,
}}

// The checker must catch each planted bug at every one of its seeds: each
// campaign's random part differs by seed, and its exposure makes the
// situation that shows the bug whatever the random part drew and however
// fast the machine is. The report names the rule broken, with the seed and
// the history lines.
func TestPlantedBugsAreCaught(t *testing.T) {
	needBinaries(t)
	for _, b := range plantedBugs {
		t.Run(b.name, func(t *testing.T) {
			src := filepath.Join(bins.root, "pkg", "featuregate", b.file)
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			planted := string(data)
			for old, repl := range b.patches {
				if !strings.Contains(planted, old) {
					t.Fatalf("the planted bug no longer applies: %s has no %q (update the test with the code)", src, old)
				}
				planted = strings.Replace(planted, old, repl, 1)
			}
			build := campaignDir(t, "planted-"+strings.ReplaceAll(b.name, " ", "-"))
			patched := filepath.Join(build, b.file)
			if err := os.WriteFile(patched, []byte(planted), 0o600); err != nil {
				t.Fatal(err)
			}
			consumer := filepath.Join(build, "consumer-planted")
			if err := buildConsumer(bins.root, consumer, map[string]string{src: patched}); err != nil {
				t.Fatal(err)
			}
			for i := range *plantedSeeds {
				seed := b.seed + int64(i)
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					plantedCampaign(t, b, seed, consumer)
				})
			}
		})
	}
}

// plantedSettle is how long a planted campaign's exposure waits for its
// consumer to settle first. The exposure runs either way; one that begins
// unsettled is one whose bug has already shown (a lapse never recovered
// from, a gate flip never acted on), and each planted consumer settles
// within seconds when its bug has not.
const plantedSettle = 15 * time.Second

// plantedCampaign runs b's campaign with seed on the planted consumer and
// fails unless the checker reports b's rule broken.
func plantedCampaign(t *testing.T, b plantedBug, seed int64, consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := campaignDir(t, fmt.Sprintf("planted-%d", seed))
	res, err := Run(ctx, Config{Seed: seed, Duration: *plantedLength, Dir: dir, Manager: bins.manager, Consumer: consumer,
		Faults: b.faults, ChangesApart: b.apart, EntryRewrite: b.entryRewrite, Exposures: []string{b.exposure},
		SettleWithin: plantedSettle, Logf: t.Logf})
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	caught := 0
	for _, v := range res.Violations {
		if v.Rule != b.rule {
			continue
		}
		if caught == 0 {
			t.Logf("caught (seed %d): %s", seed, v)
			for _, n := range v.Lines {
				t.Logf("  history line %d: %s", n, lineOf(res.Events, n))
			}
		}
		caught++
	}
	if caught == 0 {
		t.Fatalf("seed %d: the checker did not catch %q (faults %s, exposure %s, %d writes, %d decisions, bench broken: %q; violations %v)",
			seed, b.name, res.Bench.FaultCounts(), b.exposure, res.Writes, res.Decisions, res.Bench.Broken(), res.Violations)
	}
	t.Logf("seed %d: %q caught: %d violations of %q (exposure %s)", seed, b.name, caught, b.rule, b.exposure)
}

func lineOf(h []Event, n int) string {
	for _, e := range h {
		if e.Line == n {
			data, _ := json.Marshal(e)
			return string(data)
		}
	}
	return "?"
}

// reportOf is the campaigns' table.
func reportOf(rs []Result, took time.Duration, seed int64) string {
	var b strings.Builder
	bench := newBench()
	var broken []string
	decisions, writes, violations, applied, leads, exits := 0, 0, 0, 0, 0, 0
	var worst, latest time.Duration
	late, lates := map[string]int{}, 0
	for _, r := range rs {
		bench.merge(r.Bench)
		for _, why := range r.Bench.Broken() {
			broken = append(broken, fmt.Sprintf("seed %d: %s", r.Seed, why))
		}
		decisions += r.Decisions
		writes += r.Writes
		applied += r.Applied
		leads += r.Leads
		exits += r.Exits
		lates += len(r.Late)
		for _, l := range r.Late {
			late[l.Fault]++
			latest = max(latest, l.After)
		}
		violations += len(r.Violations)
		worst = max(worst, r.WorstStaleness)
	}
	rules := DefaultRules()
	fmt.Fprintf(&b, "| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| written | %s by `make robustness` (test/robustness) |\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "| campaigns | %d (seeds %d to %d), %s each of traffic and faults |\n", len(rs), seed, seed+int64(len(rs))-1, *durationFlag)
	fmt.Fprintf(&b, "| total time | %s |\n", took.Round(time.Second))
	fmt.Fprintf(&b, "| faults tried | %s |\n", bench.FaultCounts())
	fmt.Fprintf(&b, "| FeatureGate writes | %d (%d changes tried, %d not made) |\n", writes, bench.Changes.Tried, bench.Changes.Failed)
	if errs := bench.FirstErrors(); len(errs) > 0 {
		fmt.Fprintf(&b, "| first errors of the bench | %s |\n", cell(strings.Join(errs, "; ")))
	}
	fmt.Fprintf(&b, "| bench health (a broken bench fails the campaign) | %s |\n", cell(healthCell(broken)))
	fmt.Fprintf(&b, "| decisions checked | %d (the consumer's `/decide`) |\n", decisions)
	fmt.Fprintf(&b, "| operator applies checked | %d (seen by a watch; %d leases taken) |\n", applied, leads)
	fmt.Fprintf(&b, "| exits checked | %d |\n", exits)
	fmt.Fprintf(&b, "| late applies excused (the residual window: decided before a stall, landed after its heal) | %d %v, the latest %s after its heal |\n", lates, late, latest.Round(time.Millisecond))
	fmt.Fprintf(&b, "| violations (target 0) | %d |\n", violations)
	fmt.Fprintf(&b, "| worst staleness of a decision | %s (bound %s + allowance %s = %s) |\n", worst.Round(time.Millisecond), rules.Bound, rules.Allowance, rules.Bound+rules.Allowance)
	return b.String()
}

// healthCell is the report's bench health: "ok", or each broken campaign's
// reasons.
func healthCell(broken []string) string {
	if len(broken) == 0 {
		return "ok (no campaign's bench broken for most of its tries, nothing missing at the end)"
	}
	return "broken: " + strings.Join(broken, "; ")
}

// cell keeps text (an error's message) inside one cell of a Markdown table.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

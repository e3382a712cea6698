package fleet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

var (
	flagN          = flag.Int("fleet.n", 10, "Adopters in the fleet (make fleet passes FLEET_N; the test in make test runs 10).")
	flagSeed       = flag.Uint64("fleet.seed", uint64(envInt("FLEET_SEED", 0)), "Seed of the plan and the writes' pace; 0 draws one (env FLEET_SEED). Printed either way.")
	flagSettle     = flag.Duration("fleet.settle", 4*time.Second, "How long the fleet must be Ready with no start or exit for a change to count as settled.")
	flagReport     = flag.String("fleet.report", "", "Markdown report path (JSON beside it): runs TestFleetReport, skipped otherwise.")
	flagBenchmarks = flag.String("fleet.benchmarks", "", "Report whose Fleet section a passing TestFleetReport replaces (make fleet: BENCHMARKS.md).")
	flagWindow     = flag.Duration("fleet.window", 60*time.Second, "CPU measurement window of each idle and busy phase (TestFleetReport).")
	flagRender     = flag.String("fleet.render", "", "A fleet JSON report to write as Markdown again (TestFleetRender), without running a fleet.")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// bins are built once for every test of the package.
var bins struct{ consumer, idle, bare string }

func TestMain(m *testing.M) {
	flag.Parse()
	// The harness's clients log through controller-runtime, which prints a
	// stack when no logger is ever set.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fleet-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := controlplane.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins.consumer = filepath.Join(dir, "consumer")
	if err := build(ctx, filepath.Join(root, "examples", "consumer"), bins.consumer, "."); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	if *flagReport != "" {
		bins.idle = filepath.Join(dir, "idle")
		if err := build(ctx, filepath.Join(root, "test", "librarygo"), bins.idle, "./cmd/idle"); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			return 1
		}
		bins.bare = filepath.Join(dir, "bare")
		if err := build(ctx, root, bins.bare, "./test/fleet/cmd/bare"); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			return 1
		}
	}
	return m.Run()
}

// build builds pkg of the module in dir (a module of its own) to out.
func build(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %w\n%s", pkg, dir, err, b)
	}
	return nil
}

// seed is -fleet.seed, or one drawn now; logged so that a run can be
// repeated.
func seed(t *testing.T) uint64 {
	s := *flagSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("fleet seed %d (-fleet.seed=%d or FLEET_SEED=%d repeats it), %d adopters", s, s, s, *flagN)
	return s
}

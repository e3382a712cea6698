package conformance_test

import (
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// newManagerFunc builds a manager as manager.New does.
type newManagerFunc func(*rest.Config, manager.Options) (manager.Manager, error)

// mode is one constructor the specs run against.
type mode struct {
	name string
	new  newManagerFunc
	// skip is the specs this mode skips, by spec name (specName), each with
	// its reason: "by design: ..." or "gap: ..." (gapPrefix).
	skip map[string]string
}

// gapPrefix starts the reason of a skip that is a gap: a difference that
// should not be, skipped only so that the suite stays green until it is
// fixed. Any other reason is a difference by design.
const gapPrefix = "gap: "

// modes: the stock manager, the control, which must pass every spec; and
// the guarded one, whose differences are listed, each with its reason.
var modes = []mode{
	{name: "stock", new: manager.New},
	{name: "guarded", new: newGuarded, skip: guardedSkips},
}

// newGuarded is the drop-in: NewGuard, then Guard.NewManager with the
// options given to manager.New.
func newGuarded(cfg *rest.Config, opts manager.Options) (manager.Manager, error) {
	guard, err := featuregate.NewGuard(cfg, featuregate.Options{
		Name:        featureGateName,
		EventSource: "conformance",
	})
	if err != nil {
		return nil, err
	}
	return guard.NewManager(opts)
}

var _ = func() bool {
	for _, md := range modes {
		Describe(md.name, Label(md.name), func() {
			BeforeEach(func() {
				if reason, ok := md.skip[specName(CurrentSpecReport())]; ok && !runSkipped(reason) {
					Skip(reason)
				}
			})
			managerSpecs(md.new)
		})
	}
	return true
}()

// runSkipped is whether a listed spec runs anyway, to see it fail:
// CONFORMANCE_RUN_SKIPPED=gap runs the gaps, =all every listed spec.
func runSkipped(reason string) bool {
	switch os.Getenv("CONFORMANCE_RUN_SKIPPED") {
	case "all":
		return true
	case "gap":
		return strings.HasPrefix(reason, gapPrefix)
	}
	return false
}

// specName is a spec's name below its mode: upstream's container texts and
// its own, space-separated.
func specName(r SpecReport) string {
	texts := append([]string{}, r.ContainerHierarchyTexts...)
	if len(texts) > 0 {
		texts = texts[1:] // the mode
	}
	return strings.Join(append(texts, r.LeafNodeText), " ")
}

// specTimeout bounds a spec that takes a SpecContext: a spec whose manager
// never starts what it waits for fails after it, and the suite goes on.
const specTimeout = time.Minute

// boundedIt is It with a timeout for specs that take a SpecContext; the
// others block on nothing.
func boundedIt(text string, args ...any) bool {
	for _, a := range args {
		if _, ok := a.(func(SpecContext)); ok {
			args = append(args, SpecTimeout(specTimeout), GracePeriod(5*time.Second))
			break
		}
	}
	return It(text, append(args, Offset(1))...)
}

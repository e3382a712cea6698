package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// The release versions of the fleet: most adopters run the current one, a
// few an older one, as a cluster mid-way through its operators' upgrade
// does; the upgrade moves the older one's adopters to next.
const (
	versionCurrent = "4.22.0"
	versionOld     = "4.21.0"
	versionOlder   = "4.20.0"
	versionNext    = "4.23.0"
)

const (
	// gateCount is about the size of a feature set's gate list.
	gateCount = 40
	// defaultEnabled gates are enabled under Default; techPreviewExtra more
	// under TechPreviewNoUpgrade: some gates flip, most do not.
	defaultEnabled   = 12
	techPreviewExtra = 6
)

// Gates is the fleet's gate universe: which gates exist and which each
// feature set enables.
type Gates struct {
	Names       []string
	Default     sets.Set[string]
	TechPreview sets.Set[string]
	// Common is consumed by every adopter (an adopter watching a few gates
	// watches it too) and enabled in both feature sets: flipping it is the
	// change that restarts the whole fleet, the stampede.
	Common string
}

func newGates(rng *rand.Rand) Gates {
	g := Gates{Default: sets.New[string](), TechPreview: sets.New[string]()}
	for i := range gateCount {
		g.Names = append(g.Names, fmt.Sprintf("FleetGate%02d", i))
	}
	perm := rng.Perm(gateCount)
	for i, p := range perm {
		switch {
		case i < defaultEnabled:
			g.Default.Insert(g.Names[p])
			g.TechPreview.Insert(g.Names[p])
		case i < defaultEnabled+techPreviewExtra:
			g.TechPreview.Insert(g.Names[p])
		}
	}
	g.Common = g.Names[perm[0]]
	return g
}

// Entry is one version's status.featureGates entry: the enabled gates,
// every other gate of the universe disabled.
type Entry struct{ Enabled sets.Set[string] }

// details is the entry as the API holds it.
func (e Entry) details(version string, g Gates) configv1.FeatureGateDetails {
	var disabled []string
	for _, n := range g.Names {
		if !e.Enabled.Has(n) {
			disabled = append(disabled, n)
		}
	}
	return controlplane.GateDetails(version, sets.List(e.Enabled), disabled)
}

// changed lists the gates whose state differs between two entries.
func changed(a, b Entry) sets.Set[string] {
	return a.Enabled.SymmetricDifference(b.Enabled)
}

// Spec is what one adopter is: its release version and what it consumes.
type Spec struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Watched []string `json:"watched,omitempty"`
	// WatchFeatureSet is true for the few adopters that act on
	// spec.featureSet itself; library-go adopters never do.
	WatchFeatureSet bool `json:"watchFeatureSet,omitempty"`
}

// Consumes reports whether a change of gate restarts the adopter by what
// it consumes: every gate when Watched is empty.
func (s Spec) Consumes(gate string) bool {
	return len(s.Watched) == 0 || slices.Contains(s.Watched, gate)
}

// Describe is the spec in a table cell.
func (s Spec) Describe() string {
	w := "all gates"
	if len(s.Watched) > 0 {
		w = strings.Join(s.Watched, ",")
	}
	if s.WatchFeatureSet {
		w += " + feature set"
	}
	return w
}

// plan draws n adopters from rng: about a sixth on versionOld and a tenth on
// versionOlder (at least one each), the rest on versionCurrent; a fifth
// watching every gate, the others 1-3 gates (Common among them); about one
// in seven watching the feature set. Adopter 0 watches every gate and
// adopter 1 the feature set, so that each kind is in every fleet.
func plan(rng *rand.Rand, n int, g Gates) []Spec {
	versions := make([]string, n)
	for i := range versions {
		versions[i] = versionCurrent
	}
	k := 0
	for range max(1, n/6) {
		versions[k%n], k = versionOld, k+1
	}
	for range max(1, n/10) {
		versions[k%n], k = versionOlder, k+1
	}
	rng.Shuffle(n, func(i, j int) { versions[i], versions[j] = versions[j], versions[i] })
	specs := make([]Spec, n)
	for i := range specs {
		s := Spec{Name: fmt.Sprintf("adopter-%02d", i), Version: versions[i]}
		if i != 0 && rng.IntN(5) != 0 {
			watched := sets.New(g.Common)
			for watched.Len() < 1+rng.IntN(3) {
				watched.Insert(g.Names[rng.IntN(len(g.Names))])
			}
			s.Watched = sets.List(watched)
		}
		s.WatchFeatureSet = i == 1 || (i > 1 && rng.IntN(7) == 0)
		specs[i] = s
	}
	return specs
}

// offsets draws how long after the spec write each version's entry is
// rewritten (0.5-3 s, cluster-config-operator's pace), in write order.
func offsets(rng *rand.Rand, versions []string) []timedVersion {
	out := make([]timedVersion, 0, len(versions))
	for _, v := range versions {
		out = append(out, timedVersion{version: v, after: 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))})
	}
	slices.SortFunc(out, func(a, b timedVersion) int { return int(a.after - b.after) })
	return out
}

type timedVersion struct {
	version string
	after   time.Duration
}

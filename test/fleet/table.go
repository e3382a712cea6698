package fleet

import (
	"fmt"
	"strings"
)

// restartTable is the fleet's restarts per change, guard beside
// library-go, as Markdown.
func restartTable(phases []Phase) string {
	var b strings.Builder
	b.WriteString("| change | adopters restarted (guard) | restarts (guard) | restarts (library-go's rule) | unconsumed-change adopters at 0 |\n|---|---:|---:|---:|---:|\n")
	for _, ph := range phases {
		restarted, zero, zeroWant := 0, 0, 0
		for _, r := range ph.Adopters {
			if r.Guard > 0 {
				restarted++
			}
			if len(r.ConsumedChanged) == 0 && !r.Spec.WatchFeatureSet {
				zeroWant++
				if r.Guard == 0 {
					zero++
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %d / %d | %d | %d | %d / %d |\n", ph.Name, restarted, len(ph.Adopters), ph.Guard, ph.LibraryGo, zero, zeroWant)
	}
	return b.String()
}

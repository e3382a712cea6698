// Package eventnote bounds the notes of Events: events.k8s.io/v1 rejects a
// note longer than Limit outright, and a real payload's gate list or error
// is longer than that. An Event the API server rejects tells nobody
// anything.
package eventnote

import "unicode/utf8"

// Limit is the longest Event note the API server stores.
const Limit = 1024

// Bound cuts note to Limit bytes on a rune boundary, marking the cut.
func Bound(note string) string {
	if len(note) <= Limit {
		return note
	}
	const mark = "…"
	cut := Limit - len(mark)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + mark
}

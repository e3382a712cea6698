package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Bound keeps notes the API server accepts, cutting on a rune boundary.
func TestBound(t *testing.T) {
	if got := Bound("short"); got != "short" {
		t.Errorf("Bound(short) = %q", got)
	}
	exact := strings.Repeat("a", Limit)
	if got := Bound(exact); got != exact {
		t.Errorf("a note of exactly Limit bytes was cut")
	}
	long := strings.Repeat("é", Limit) // two bytes each
	got := Bound(long)
	if len(got) > Limit || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Bound(long) = %d bytes, valid UTF-8 %v, marked %v", len(got), utf8.ValidString(got), strings.HasSuffix(got, "…"))
	}
}

// Package mdsection replaces one "## " section of a Markdown report, so
// that reports written by different make targets (BENCHMARKS.md by `make
// bench`, its Fleet section by `make fleet`) share one file without either
// dropping the other's section.
package mdsection

import "strings"

// bounds is where the level-2 section titled heading starts and ends in
// doc (ends at the next level-2 heading or the end); ok is false when doc
// has no such section.
func bounds(doc, heading string) (start, end int, ok bool) {
	title := "## " + heading + "\n"
	switch {
	case strings.HasPrefix(doc, title):
		start = 0
	case strings.Contains(doc, "\n"+title):
		start = strings.Index(doc, "\n"+title) + 1
	default:
		return 0, 0, false
	}
	rest := doc[start+len(title):]
	if i := strings.Index(rest, "\n## "); i >= 0 {
		return start, start + len(title) + i + 1, true
	}
	return start, len(doc), true
}

// Get returns the section titled heading, its title line included, or ""
// when doc has none.
func Get(doc, heading string) string {
	start, end, ok := bounds(doc, heading)
	if !ok {
		return ""
	}
	return doc[start:end]
}

// Put replaces the section titled heading with section (which carries its
// own title line), or appends it when doc has none.
func Put(doc, heading, section string) string {
	if !strings.HasSuffix(section, "\n") {
		section += "\n"
	}
	start, end, ok := bounds(doc, heading)
	if !ok {
		if doc != "" && !strings.HasSuffix(doc, "\n\n") {
			doc = strings.TrimRight(doc, "\n") + "\n\n"
		}
		return doc + section
	}
	tail := doc[end:]
	if tail != "" && !strings.HasSuffix(section, "\n\n") {
		section += "\n"
	}
	return doc[:start] + section + tail
}

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Line is one output line of a process. A zap JSON line is parsed, so that
// tests can assert on its keys rather than on how its message is worded.
type Line struct {
	Raw string
	// Recv is when the harness read the line.
	Recv time.Time
	// TS is the line's own ts, zero when it has none (klog lines, say).
	// The operator's RFC 3339 timestamps and zap's epoch seconds both parse.
	TS time.Time
	// Msg is the msg key of a JSON line, else the whole line.
	Msg string
	// Keys holds every key of a JSON line (msg and ts included; numbers
	// as json.Number); nil for other lines.
	Keys map[string]any
}

// ParseLine parses raw, read at recv.
func ParseLine(raw string, recv time.Time) Line {
	l := Line{Raw: raw, Recv: recv, Msg: raw}
	if !strings.HasPrefix(raw, "{") {
		return l
	}
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	var keys map[string]any
	if d.Decode(&keys) != nil {
		return l
	}
	l.Keys = keys
	l.Msg, _ = keys["msg"].(string)
	switch ts := keys["ts"].(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.TS = t
		}
	case json.Number:
		if f, err := ts.Float64(); err == nil {
			sec := int64(f)
			l.TS = time.Unix(sec, int64((f-float64(sec))*1e9))
		}
	}
	return l
}

// At is the best-known time of the line: its own timestamp when it has one.
func (l Line) At() time.Time {
	if !l.TS.IsZero() {
		return l.TS
	}
	return l.Recv
}

// Has reports whether the line has key.
func (l Line) Has(key string) bool {
	_, ok := l.Keys[key]
	return ok
}

// Get is key's value: a string as it is, anything else as JSON ("3",
// "true", `["a"]`); "" when absent.
func (l Line) Get(key string) string {
	v, ok := l.Keys[key]
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	// As zap writes it: "->" stays "->", not "-\u003e".
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Match selects lines; its String says what it looks for, in errors.
type Match struct {
	desc string
	fn   func(Line) bool
}

func (m Match) String() string { return m.desc }

// Matches reports whether l is selected.
func (m Match) Matches(l Line) bool { return m.fn(l) }

// Contains selects lines holding every part anywhere in the raw text.
func Contains(parts ...string) Match {
	return Match{desc: fmt.Sprintf("containing %q", parts), fn: func(l Line) bool {
		for _, p := range parts {
			if !strings.Contains(l.Raw, p) {
				return false
			}
		}
		return true
	}}
}

// Message selects lines whose message contains substr.
func Message(substr string) Match {
	return Match{desc: fmt.Sprintf("with a message containing %q", substr), fn: func(l Line) bool {
		return strings.Contains(l.Msg, substr)
	}}
}

// HasKey selects lines that have key.
func HasKey(key string) Match {
	return Match{desc: fmt.Sprintf("with key %q", key), fn: func(l Line) bool { return l.Has(key) }}
}

// KeyEquals selects lines whose key has value, as Get spells it.
func KeyEquals(key, value string) Match {
	return Match{desc: fmt.Sprintf("with %s=%q", key, value), fn: func(l Line) bool {
		return l.Has(key) && l.Get(key) == value
	}}
}

// KeyContains selects lines whose key, as Get spells it, contains substr:
// for list values such as a "diff".
func KeyContains(key, substr string) Match {
	return Match{desc: fmt.Sprintf("with %s containing %q", key, substr), fn: func(l Line) bool {
		return l.Has(key) && strings.Contains(l.Get(key), substr)
	}}
}

// KeyAtLeast selects lines whose key is a number of at least n.
func KeyAtLeast(key string, n float64) Match {
	return Match{desc: fmt.Sprintf("with %s >= %v", key, n), fn: func(l Line) bool {
		v, err := strconv.ParseFloat(l.Get(key), 64)
		return l.Has(key) && err == nil && v >= n
	}}
}

// All selects lines every m selects.
func All(ms ...Match) Match {
	descs := make([]string, 0, len(ms))
	for _, m := range ms {
		descs = append(descs, m.desc)
	}
	return Match{desc: strings.Join(descs, " and "), fn: func(l Line) bool {
		for _, m := range ms {
			if !m.fn(l) {
				return false
			}
		}
		return true
	}}
}

// ErrLogClosed is Wait's error when the output ended without the line.
var ErrLogClosed = errors.New("output ended")

// Log collects output lines; safe for a writing process and reading tests.
// The zero value is ready to use.
type Log struct {
	mu      sync.Mutex
	lines   []Line
	partial []byte
	hooks   []*hook
	changed chan struct{} // closed on every new line and on Close
	closed  bool
}

type hook struct {
	match Match
	every bool // else once
	fn    func(Line)
	fired bool
}

// Write adds the complete lines in p. Hooks run after the lock is released,
// once every line of p is in, so a hook may read the log.
func (b *Log) Write(p []byte) (int, error) {
	now := time.Now()
	b.mu.Lock()
	b.partial = append(b.partial, p...)
	var fire []func()
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		fire = b.addLocked(ParseLine(string(b.partial[:i]), now), fire)
		b.partial = b.partial[i+1:]
	}
	b.mu.Unlock()
	for _, fn := range fire {
		fn()
	}
	return len(p), nil
}

// Close ends the log: a last line without a newline is added, and waiters
// stop waiting.
func (b *Log) Close() {
	b.mu.Lock()
	var fire []func()
	if len(b.partial) > 0 {
		fire = b.addLocked(ParseLine(string(b.partial), time.Now()), fire)
		b.partial = nil
	}
	b.closed = true
	b.notifyLocked()
	b.mu.Unlock()
	for _, fn := range fire {
		fn()
	}
}

func (b *Log) addLocked(l Line, fire []func()) []func() {
	b.lines = append(b.lines, l)
	for _, h := range b.hooks {
		if (h.every || !h.fired) && h.match.fn(l) {
			h.fired = true
			fn := h.fn
			fire = append(fire, func() { fn(l) })
		}
	}
	b.notifyLocked()
	return fire
}

func (b *Log) notifyLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// OnLine runs fn for every line written from now on, in the writing
// goroutine: to act on a line faster than polling can.
func (b *Log) OnLine(fn func(Line)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, &hook{match: Match{fn: func(Line) bool { return true }}, every: true, fn: fn})
}

// OnFirst runs fn once, in the writing goroutine, for the first line from
// now on that m selects: e.g. to signal a process in the middle of the
// shutdown that line announces.
func (b *Log) OnFirst(m Match, fn func(Line)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, &hook{match: m, fn: fn})
}

// Lines returns the complete lines so far.
func (b *Log) Lines() []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Line(nil), b.lines...)
}

// Len is the number of complete lines so far.
func (b *Log) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines)
}

// String is the whole output so far.
func (b *Log) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, l := range b.lines {
		s.WriteString(l.Raw)
		s.WriteByte('\n')
	}
	s.Write(b.partial)
	return s.String()
}

// FindFrom is the first line at index from or later that m selects, and its
// index.
func (b *Log) FindFrom(from int, m Match) (Line, int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := max(from, 0); i < len(b.lines); i++ {
		if m.fn(b.lines[i]) {
			return b.lines[i], i, true
		}
	}
	return Line{}, -1, false
}

// Find is the first line m selects.
func (b *Log) Find(m Match) (Line, bool) {
	l, _, ok := b.FindFrom(0, m)
	return l, ok
}

// IndexWhere is the index of the first line m selects, or -1.
func (b *Log) IndexWhere(m Match) int {
	_, i, _ := b.FindFrom(0, m)
	return i
}

// CountWhere is the number of lines m selects.
func (b *Log) CountWhere(m Match) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if m.fn(l) {
			n++
		}
	}
	return n
}

// First is the first line holding every part, or "".
func (b *Log) First(parts ...string) string {
	l, _ := b.Find(Contains(parts...))
	return l.Raw
}

// Index is the index of the first line holding every part, or -1.
func (b *Log) Index(parts ...string) int { return b.IndexWhere(Contains(parts...)) }

// Count is the number of lines holding every part.
func (b *Log) Count(parts ...string) int { return b.CountWhere(Contains(parts...)) }

// Wait waits for the first line at index from or later that m selects. It
// returns ErrLogClosed once the log is closed without one, or ctx's error.
func (b *Log) Wait(ctx context.Context, from int, m Match) (Line, int, error) {
	for {
		b.mu.Lock()
		for i := max(from, 0); i < len(b.lines); i++ {
			if m.fn(b.lines[i]) {
				l := b.lines[i]
				b.mu.Unlock()
				return l, i, nil
			}
		}
		from = len(b.lines)
		if b.closed {
			b.mu.Unlock()
			return Line{}, -1, ErrLogClosed
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return Line{}, -1, ctx.Err()
		case <-changed:
		}
	}
}

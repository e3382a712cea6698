package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
)

// Line is one log call: its message and its keys.
type Line struct {
	Msg    string
	fields map[string]any
	err    bool
}

// IsError reports whether the line was logged at error level.
func (l Line) IsError() bool { return l.err }

// Has reports whether the line has key.
func (l Line) Has(key string) bool { _, ok := l.fields[key]; return ok }

// Get is a key's value: a string (or a named string type) as it is,
// anything else as JSON.
func (l Line) Get(key string) string {
	v := l.fields[key]
	switch {
	case v == nil:
		return ""
	case reflect.TypeOf(v).Kind() == reflect.String:
		return reflect.ValueOf(v).String()
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// String is the message and its keys, in key order: a failed test's log
// reads the same on every run.
func (l Line) String() string {
	pairs := make([]string, 0, len(l.fields))
	for _, k := range slices.Sorted(maps.Keys(l.fields)) {
		pairs = append(pairs, k+"="+l.Get(k))
	}
	return l.Msg + " " + strings.Join(pairs, " ")
}

// Match selects lines.
type Match func(Line) bool

// Message matches a message containing substr.
func Message(substr string) Match {
	return func(l Line) bool { return strings.Contains(l.Msg, substr) }
}

// HasKey matches a line with key.
func HasKey(key string) Match { return func(l Line) bool { return l.Has(key) } }

// KeyEquals matches a line whose key has value.
func KeyEquals(key, value string) Match {
	return func(l Line) bool { return l.Has(key) && l.Get(key) == value }
}

// All matches a line every m matches.
func All(ms ...Match) Match {
	return func(l Line) bool {
		for _, m := range ms {
			if !m(l) {
				return false
			}
		}
		return true
	}
}

// Log keeps what a logr.Logger from NewLogger logged.
type Log struct {
	mu      sync.Mutex
	lines   []Line
	changed chan struct{}
}

// NewLogger returns a logger recording into a new Log, shown if the test
// fails.
func NewLogger(t testing.TB) (logr.Logger, *Log) {
	log := &Log{changed: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("guard log:\n%s", log.String())
		}
	})
	return logr.New(&sink{log: log}), log
}

func (b *Log) add(l Line) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, l)
	close(b.changed)
	b.changed = make(chan struct{})
}

// Lines is every line so far.
func (b *Log) Lines() []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Line(nil), b.lines...)
}

func (b *Log) String() string {
	var s strings.Builder
	for _, l := range b.Lines() {
		s.WriteString(l.String() + "\n")
	}
	return s.String()
}

// Find is the first line m matches.
func (b *Log) Find(m Match) (Line, bool) {
	if i := b.IndexWhere(m); i >= 0 {
		return b.Lines()[i], true
	}
	return Line{}, false
}

// IndexWhere is the index of the first line m matches, or -1.
func (b *Log) IndexWhere(m Match) int {
	for i, l := range b.Lines() {
		if m(l) {
			return i
		}
	}
	return -1
}

// CountWhere counts the lines m matches.
func (b *Log) CountWhere(m Match) int {
	n := 0
	for _, l := range b.Lines() {
		if m(l) {
			n++
		}
	}
	return n
}

// First is the first line, as a string, containing every part; "" if none.
func (b *Log) First(parts ...string) string {
	for _, l := range b.Lines() {
		s, all := l.String(), true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return s
		}
	}
	return ""
}

// Wait waits for a line at index from or later that m matches.
func (b *Log) Wait(ctx context.Context, from int, m Match) (Line, int, error) {
	for {
		b.mu.Lock()
		lines, changed := b.lines, b.changed
		b.mu.Unlock()
		for i := from; i < len(lines); i++ {
			if m(lines[i]) {
				return lines[i], i, nil
			}
		}
		from = max(from, len(lines))
		select {
		case <-ctx.Done():
			return Line{}, -1, fmt.Errorf("no such log line: %w", ctx.Err())
		case <-changed:
		}
	}
}

// sink is a logr.LogSink recording into a Log.
type sink struct {
	log    *Log
	name   string
	values []any
}

func (s *sink) Init(logr.RuntimeInfo)  {}
func (s *sink) Enabled(level int) bool { return level == 0 } // what a default logger shows

func (s *sink) Info(_ int, msg string, kv ...any) { s.record(msg, nil, false, kv) }

func (s *sink) Error(err error, msg string, kv ...any) { s.record(msg, err, true, kv) }

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{log: s.log, name: s.name, values: append(append([]any(nil), s.values...), kv...)}
}

func (s *sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &sink{log: s.log, name: name, values: s.values}
}

func (s *sink) record(msg string, err error, isErr bool, kv []any) {
	fields := map[string]any{}
	if s.name != "" {
		fields["logger"] = s.name
	}
	all := append(append([]any(nil), s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		fields[fmt.Sprint(all[i])] = all[i+1]
	}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log.add(Line{Msg: msg, fields: fields, err: isErr})
}

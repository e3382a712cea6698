package featuregate

import (
	"testing"
	"time"
)

func TestFreshnessProofNeverMovesBack(t *testing.T) {
	f := newFreshness(2 * time.Second)
	if f.fresh() {
		t.Fatal("fresh without proof")
	}
	if _, ok := f.age(time.Now()); ok {
		t.Fatal("an age without proof")
	}
	now := time.Now()
	f.proven(now.Add(-time.Second))
	f.proven(now.Add(-1500 * time.Millisecond)) // a late answer to an older read
	age, ok := f.age(now)
	if !ok || age != time.Second {
		t.Fatalf("age = %s, %v; want 1s from the newer proof", age, ok)
	}
	if !f.fresh() {
		t.Fatal("proof of 1s ago is fresh under a 2s bound")
	}
	f.proven(now.Add(-3 * time.Second))
	if age, _ := f.age(now); age != time.Second {
		t.Fatalf("an older proof moved it back: age %s", age)
	}
	if d := f.untilLapse(time.Time{}); d <= 0 || d > time.Second {
		t.Fatalf("untilLapse = %s; want (0, 1s]", d)
	}
	if f.period() != time.Second {
		t.Fatalf("period = %s; want half the bound", f.period())
	}
}

func TestFreshnessLapsesAtTheBound(t *testing.T) {
	f := newFreshness(2 * time.Second)
	f.proven(time.Now().Add(-2 * time.Second))
	if f.fresh() {
		t.Fatal("proof as old as the bound is not fresh")
	}
	if d := f.untilLapse(time.Time{}); d != time.Millisecond {
		t.Fatalf("untilLapse of a lapsed proof = %s; want the minimum", d)
	}
}

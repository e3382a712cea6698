package manifest

import (
	"reflect"
	"testing"
)

func TestRunLevel(t *testing.T) {
	for file, want := range map[string]string{
		"0000_30_cluster-api_capi-operator_00_namespace.yaml": "0000_30",
		"0000_50_x.yaml":  "0000_50",
		"0001_05_x.json":  "0001_05",
		"0000_30_":        "0000_30",
		"0000_30":         "",
		"0000_30.yaml":    "",
		"0000_3_x.yaml":   "",
		"000a_30_x.yaml":  "",
		"0000-30_x.yaml":  "",
		"namespace.yaml":  "",
		"":                "",
		"00000_30_x.yaml": "",
	} {
		if got := runLevel(file); got != want {
			t.Errorf("RunLevel(%q) = %q, want %q", file, got, want)
		}
	}
}

func TestGroups(t *testing.T) {
	ms := []Manifest{
		{File: "0000_10_a.yaml"},
		{File: "0000_10_a.yaml", Index: 1},
		{File: "0000_10_b.yaml"},
		{File: "0000_30_c.yaml"},
		{File: "0000_50_d.yaml"},
		{File: "0000_50_e.yaml"},
		{File: "x.yaml"},
		{File: "y.yaml"},
	}
	var got [][]string
	for _, g := range Groups(ms) {
		var names []string
		for _, m := range g {
			names = append(names, m.File)
		}
		got = append(got, names)
	}
	want := [][]string{
		{"0000_10_a.yaml", "0000_10_a.yaml", "0000_10_b.yaml"},
		{"0000_30_c.yaml"},
		{"0000_50_d.yaml", "0000_50_e.yaml"},
		{"x.yaml", "y.yaml"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Groups() = %v, want %v", got, want)
	}
	if g := Groups(nil); g != nil {
		t.Errorf("Groups(nil) = %v, want nil", g)
	}
	// Appending to a group must not overwrite the next one.
	gs := Groups(ms)
	_ = append(gs[0], Manifest{File: "z"})
	if gs[1][0].File != "0000_30_c.yaml" {
		t.Errorf("appending to a group changed the next group")
	}
}

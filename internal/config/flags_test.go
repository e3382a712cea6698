package config

import (
	"encoding/json"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/featuregate-operator/operator/api/v1alpha1"
)

func newFlagSet() (*flag.FlagSet, *Flags) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, BindFlags(fs)
}

func complete(t *testing.T, args ...string) (*v1alpha1.OperatorConfig, error) {
	t.Helper()
	fs, f := newFlagSet()
	fs.Bool("other-flag", false, "a flag that is not an OperatorConfig flag")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%v): %v", args, err)
	}
	return f.Complete()
}

func TestFlagNames(t *testing.T) {
	want := []string{
		"config",
		"feature-gate-name", "feature-gate-file", "release-version", "watched-gates", "manifests-dir", "cluster-profile",
		"cluster-operator-name", "resync-period", "graceful-shutdown-timeout", "initial-fetch-backoff-cap",
		"initial-fetch-timeout", "cache-sync-timeout", "featuregate-freshness-bound", "leader-elect", "leader-election-namespace",
		"leader-election-id", "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
		"exclude-identifier", "max-manifest-size", "metrics-bind-address", "metrics-secure", "health-probe-bind-address",
	}
	fs, _ := newFlagSet()
	var got []string
	fs.VisitAll(func(f *flag.Flag) { got = append(got, f.Name) })
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("flags = %v\nwant %v", got, want)
	}
}

func TestFlagDefaults(t *testing.T) {
	fs, _ := newFlagSet()
	want := map[string]string{
		"config":                      "",
		"feature-gate-name":           "cluster",
		"release-version":             "",
		"watched-gates":               "",
		"manifests-dir":               "",
		"cluster-profile":             "",
		"cluster-operator-name":       "featuregate-operator",
		"resync-period":               "3m0s",
		"graceful-shutdown-timeout":   "30s",
		"initial-fetch-backoff-cap":   "2s",
		"initial-fetch-timeout":       "0s",
		"cache-sync-timeout":          "2m0s",
		"featuregate-freshness-bound": "2s",
		"leader-elect":                "false",
		"leader-election-namespace":   "",
		"leader-election-id":          "featuregate-operator.featuregate-operator.io",
		"leader-elect-lease-duration": "2m17s",
		"leader-elect-renew-deadline": "1m47s",
		"leader-elect-retry-period":   "26s",
		"exclude-identifier":          "",
		"max-manifest-size":           "3Mi",
		"metrics-bind-address":        ":8443",
		"metrics-secure":              "true",
		"health-probe-bind-address":   ":8081",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s not registered", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, def)
		}
	}
	// No flag, no file: the defaults.
	cfg, err := complete(t)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, v1alpha1.NewDefaultOperatorConfig()) {
		t.Errorf("Complete() with no flags = %+v", cfg)
	}
}

// lookup returns the value at a dotted JSON path of cfg.
func lookup(t *testing.T, cfg *v1alpha1.OperatorConfig, path string) any {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestEveryFlagSetsItsField checks each flag against the JSON path it
// claims, by setting it to a non-default value.
func TestEveryFlagSetsItsField(t *testing.T) {
	values := map[string]struct {
		arg  string
		want any // as in the JSON form
	}{
		FlagFeatureGateName:         {"other", "other"},
		FlagFeatureGateFile:         {"/etc/featuregate/featuregate.yaml", "/etc/featuregate/featuregate.yaml"},
		FlagReleaseVersion:          {"4.18.1", "4.18.1"},
		FlagWatchedGates:            {"A, B", []any{"A", "B"}},
		FlagManifestsDir:            {"/m", "/m"},
		FlagClusterProfile:          {"hypershift", "hypershift"},
		FlagClusterOperatorName:     {"co", "co"},
		FlagResyncPeriod:            {"10m", "10m0s"},
		FlagGracefulShutdownTimeout: {"5s", "5s"},
		FlagInitialFetchBackoffCap:  {"10s", "10s"},
		FlagInitialFetchTimeout:     {"1h", "1h0m0s"},
		FlagCacheSyncTimeout:        {"7s", "7s"},
		FlagFreshnessBound:          {"1500ms", "1.5s"},
		FlagLeaderElect:             {"true", true},
		FlagLeaderElectionNamespace: {"ns", "ns"},
		FlagLeaderElectionID:        {"lease.example.com", "lease.example.com"},
		FlagLeaseDuration:           {"3m", "3m0s"},
		FlagRenewDeadline:           {"90s", "1m30s"},
		FlagRetryPeriod:             {"5s", "5s"},
		FlagExcludeIdentifier:       {"hypershift", "hypershift"},
		FlagMaxManifestSize:         {"1Mi", "1Mi"},
		FlagMetricsBindAddress:      {"0", "0"},
		FlagMetricsSecure:           {"false", false},
		FlagHealthProbeBindAddress:  {":9090", ":9090"},
	}
	if len(values) != len(flagSpecs) {
		t.Fatalf("test covers %d flags, there are %d", len(values), len(flagSpecs))
	}
	for _, s := range flagSpecs {
		v, ok := values[s.name]
		if !ok {
			t.Errorf("flag --%s not covered", s.name)
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			cfg, err := complete(t, "--"+s.name+"="+v.arg)
			if err != nil {
				t.Fatal(err)
			}
			if got := lookup(t, cfg, s.path); !reflect.DeepEqual(got, v.want) {
				t.Errorf("--%s=%s: %s = %#v, want %#v", s.name, v.arg, s.path, got, v.want)
			}
			// Only that field changed.
			def := v1alpha1.NewDefaultOperatorConfig()
			for _, o := range flagSpecs {
				if o.path != s.path && !reflect.DeepEqual(lookup(t, cfg, o.path), lookup(t, def, o.path)) {
					t.Errorf("--%s also changed %s", s.name, o.path)
				}
			}
		})
	}
}

const fileWithValues = header + `featureGateName: from-file
resyncPeriod: 10m
watchedGates: [FileGate]
leaderElection:
  leaderElect: true
  resourceName: file-lease
metrics:
  secure: false
  bindAddress: ":9443"
`

func TestFlagOverFilePrecedence(t *testing.T) {
	path := writeFile(t, fileWithValues)
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c *v1alpha1.OperatorConfig)
	}{{
		name: "file values without flags; defaults for the rest",
		args: nil,
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.FeatureGateName != "from-file" || c.ResyncPeriod.Duration != 10*time.Minute ||
				!c.LeaderElection.LeaderElect || c.LeaderElection.ResourceName != "file-lease" ||
				c.MetricsSecure() || c.Metrics.BindAddress != ":9443" ||
				!slices.Equal(c.WatchedGates, []string{"FileGate"}) {
				t.Errorf("got %+v", c)
			}
			if c.ClusterOperatorName != "featuregate-operator" || c.CacheSyncTimeout.Duration != 2*time.Minute {
				t.Errorf("defaults not applied: %+v", c)
			}
		},
	}, {
		name: "explicit flags override the file",
		args: []string{"--feature-gate-name=from-flag", "--resync-period=1m", "--watched-gates=F1,F2", "--leader-election-id=flag-lease"},
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.FeatureGateName != "from-flag" || c.ResyncPeriod.Duration != time.Minute ||
				!slices.Equal(c.WatchedGates, []string{"F1", "F2"}) || c.LeaderElection.ResourceName != "flag-lease" {
				t.Errorf("got %+v", c)
			}
			if !c.LeaderElection.LeaderElect || c.Metrics.BindAddress != ":9443" {
				t.Errorf("file values not kept: %+v", c)
			}
		},
	}, {
		name: "an explicit flag equal to the default still overrides the file",
		args: []string{"--leader-elect=false", "--metrics-secure=true", "--metrics-bind-address=:8443", "--resync-period=3m"},
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.LeaderElection.LeaderElect || !c.MetricsSecure() || c.Metrics.BindAddress != ":8443" ||
				c.ResyncPeriod.Duration != 3*time.Minute {
				t.Errorf("got %+v", c)
			}
			if c.FeatureGateName != "from-file" {
				t.Errorf("file value lost: %+v", c)
			}
		},
	}, {
		name: "an empty --watched-gates clears the file's list",
		args: []string{"--watched-gates="},
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if len(c.WatchedGates) != 0 {
				t.Errorf("watchedGates = %q", c.WatchedGates)
			}
		},
	}, {
		name: "a repeated --watched-gates appends",
		args: []string{"--watched-gates=A", "--watched-gates=B,C"},
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if !slices.Equal(c.WatchedGates, []string{"A", "B", "C"}) {
				t.Errorf("watchedGates = %q", c.WatchedGates)
			}
		},
	}, {
		name: "flags that are not OperatorConfig flags change nothing",
		args: []string{"--other-flag"},
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.FeatureGateName != "from-file" {
				t.Errorf("got %+v", c)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := complete(t, append([]string{"--config=" + path}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestMergeReturnsOverriddenFields(t *testing.T) {
	fs, f := newFlagSet()
	if err := fs.Parse([]string{"--resync-period=1m", "--metrics-secure=false"}); err != nil {
		t.Fatal(err)
	}
	dst := v1alpha1.NewDefaultOperatorConfig()
	set := Merge(dst, f.values, fs)
	want := map[string]string{"resyncPeriod": "resync-period", "metrics.secure": "metrics-secure"}
	if !reflect.DeepEqual(set, want) {
		t.Errorf("Merge = %v, want %v", set, want)
	}
	// dst does not share memory with the flag values.
	*f.values.Metrics.Secure = true
	if dst.MetricsSecure() {
		t.Error("dst.Metrics.Secure aliases the flag value")
	}
}

func TestCompleteErrors(t *testing.T) {
	badFile := writeFile(t, header+"resyncPeriod: 100ms\nunknownField: 1\n")
	invalidFile := writeFile(t, header+"resyncPeriod: 100ms\n")
	tests := []struct {
		name string
		args []string
		errs []string // empty: success
	}{
		{"invalid flag value names field and flag", []string{"--resync-period=0"},
			[]string{"command-line flags", "resyncPeriod: Invalid value", "set by flag --resync-period"}},
		{"empty required flag", []string{"--feature-gate-name="},
			[]string{"featureGateName: Required value", "set by flag --feature-gate-name"}},
		{"bad watched gates entry names the index and flag", []string{"--watched-gates=A,,B"},
			[]string{"watchedGates[1]: Required value", "set by flag --watched-gates"}},
		{"strict file errors name the file", []string{"--config=" + badFile},
			[]string{badFile, `unknown field "unknownField"`}},
		{"file validation errors name the file", []string{"--config=" + invalidFile},
			[]string{invalidFile, "resyncPeriod: Invalid value"}},
		{"a flag can fix an invalid file value", []string{"--config=" + invalidFile, "--resync-period=5m"}, nil},
		{"missing file", []string{"--config=/nonexistent/config.yaml"}, []string{"/nonexistent/config.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := complete(t, tt.args...)
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Complete succeeded with %+v", cfg)
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestCompleteBeforeParse(t *testing.T) {
	_, f := newFlagSet()
	if _, err := f.Complete(); err == nil {
		t.Fatal("Complete before Parse succeeded")
	}
}

func TestConfigFile(t *testing.T) {
	fs, f := newFlagSet()
	if err := fs.Parse([]string{"--config", "/x.yaml"}); err != nil {
		t.Fatal(err)
	}
	if f.ConfigFile() != "/x.yaml" {
		t.Errorf("ConfigFile() = %q", f.ConfigFile())
	}
}

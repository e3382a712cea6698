package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/featuregate-operator/operator/api/v1alpha1"
)

const header = "apiVersion: operator.featuregate-operator.io/v1alpha1\nkind: OperatorConfig\n"

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadSample(t *testing.T) {
	path := filepath.Join("..", "..", "config", "samples", "operatorconfig.yaml")
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	if cfg.ManifestsDir != "/manifests" || !cfg.LeaderElection.LeaderElect ||
		!reflect.DeepEqual(cfg.WatchedGates, []string{"ExampleGateA", "ExampleGateB"}) ||
		cfg.ResyncPeriod.Duration != 3*time.Minute {
		t.Errorf("sample decoded to %+v", cfg)
	}
	// The sample documents every field: each must be present in it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range flagSpecs {
		key := s.path[strings.LastIndexByte(s.path, '.')+1:]
		if !strings.Contains(string(data), "\n"+key+":") && !strings.Contains(string(data), "  "+key+":") {
			t.Errorf("sample does not set %s", s.path)
		}
		if !strings.Contains(string(data), "--"+s.name) {
			t.Errorf("sample does not name flag --%s", s.name)
		}
	}
}

func TestLoadManagerConfigMapFile(t *testing.T) {
	// config/manager/config.yaml is put in the manager's ConfigMap.
	cfg, err := Load(filepath.Join("..", "..", "config", "manager", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ManifestsDir != "/manifests" {
		t.Errorf("manifestsDir = %q, want /manifests", cfg.ManifestsDir)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		content string
		check   func(t *testing.T, c *v1alpha1.OperatorConfig)
		errs    []string // substrings of the error; empty: success
	}{{
		name:    "minimal file gets defaults",
		content: header,
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if !reflect.DeepEqual(c, v1alpha1.NewDefaultOperatorConfig()) {
				t.Errorf("got %+v", c)
			}
		},
	}, {
		name:    "values are read",
		content: header + "featureGateName: other\nresyncPeriod: 90s\nmetrics:\n  secure: false\nleaderElection:\n  leaderElect: true\nwatchedGates: [A, B]\n",
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.FeatureGateName != "other" || c.ResyncPeriod.Duration != 90*time.Second || c.MetricsSecure() ||
				!c.LeaderElection.LeaderElect || !reflect.DeepEqual(c.WatchedGates, []string{"A", "B"}) ||
				c.ClusterOperatorName != "featuregate-operator" {
				t.Errorf("got %+v", c)
			}
		},
	}, {
		name:    "JSON is accepted",
		content: `{"apiVersion":"operator.featuregate-operator.io/v1alpha1","kind":"OperatorConfig","manifestsDir":"/m"}`,
		check: func(t *testing.T, c *v1alpha1.OperatorConfig) {
			if c.ManifestsDir != "/m" {
				t.Errorf("got %+v", c)
			}
		},
	}, {
		name:    "trailing empty document is ignored",
		content: header + "---\n# nothing\n",
	}, {
		name:    "unknown top-level field is named",
		content: header + "resyncPeriods: 3m\n",
		errs:    []string{`unknown field "resyncPeriods"`},
	}, {
		name:    "unknown nested field is named with its path",
		content: header + "leaderElection:\n  leaderElection: true\n",
		errs:    []string{`unknown field "leaderElection.leaderElection"`},
	}, {
		name:    "field names are case-sensitive",
		content: header + "FeatureGateName: cluster\n",
		errs:    []string{`unknown field "FeatureGateName"`},
	}, {
		name:    "duplicate key",
		content: header + "featureGateName: a\nfeatureGateName: b\n",
		errs:    []string{`"featureGateName" already set`},
	}, {
		name:    "bad duration is named",
		content: header + "gracefulShutdownTimeout: 30 seconds\n",
		errs:    []string{`gracefulShutdownTimeout: Invalid value: "30 seconds"`},
	}, {
		name:    "nested-free duration given as a number is named",
		content: header + "cacheSyncTimeout: 120\n",
		errs:    []string{"cacheSyncTimeout: Invalid value: 120", "duration string"},
	}, {
		name:    "every bad duration is named",
		content: header + "resyncPeriod: x\ninitialFetchTimeout: 1y\n",
		errs:    []string{"resyncPeriod: Invalid value", "initialFetchTimeout: Invalid value"},
	}, {
		name:    "wrong type names the field",
		content: header + "metrics:\n  secure: maybe\n",
		errs:    []string{"metrics.secure"},
	}, {
		name:    "wrong kind",
		content: "apiVersion: operator.featuregate-operator.io/v1alpha1\nkind: ConfigMap\n",
		errs:    []string{`kind "ConfigMap"`, `expected apiVersion "operator.featuregate-operator.io/v1alpha1" and kind "OperatorConfig"`},
	}, {
		name:    "wrong apiVersion",
		content: "apiVersion: operator.featuregate-operator.io/v1\nkind: OperatorConfig\n",
		errs:    []string{`unsupported apiVersion "operator.featuregate-operator.io/v1"`},
	}, {
		name:    "missing apiVersion",
		content: "kind: OperatorConfig\n",
		errs:    []string{"apiVersion and kind are required"},
	}, {
		name:    "empty file",
		content: "# nothing here\n",
		errs:    []string{"is empty"},
	}, {
		name:    "not a mapping",
		content: "- a\n",
		errs:    []string{"must be a YAML mapping"},
	}, {
		name:    "two documents",
		content: header + "---\n" + header,
		errs:    []string{"holds 2 YAML documents"},
	}, {
		name:    "syntax error",
		content: header + "featureGateName: [\n",
		errs:    []string{"yaml"},
	}, {
		name:    "validation errors name every field",
		content: header + "featureGateName: Not_Valid\nresyncPeriod: 100ms\nwatchedGates: [A, A, \"\"]\nclusterProfile: a/b\nleaderElection:\n  resourceNamespace: Bad\n",
		errs: []string{
			"invalid config file", "featureGateName: Invalid value", "resyncPeriod: Invalid value",
			"watchedGates[1]: Duplicate value", "watchedGates[2]: Required value", "clusterProfile: Invalid value",
			"leaderElection.resourceNamespace: Invalid value",
		},
	}, {
		name:    "negative duration fails validation",
		content: header + "gracefulShutdownTimeout: -5s\n",
		errs:    []string{"gracefulShutdownTimeout: Invalid value", "must be greater than 0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.content)
			cfg, err := Load(path)
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if tt.check != nil {
					tt.check(t, cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error", cfg)
			}
			if cfg != nil {
				t.Errorf("Load returned a config along with the error")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file %s", msg, path)
			}
			for _, want := range tt.errs {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

func TestDecodeDoesNotDefault(t *testing.T) {
	c, err := Decode([]byte(header + "metrics:\n  bindAddress: \":9\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &v1alpha1.OperatorConfig{TypeMeta: c.TypeMeta, Metrics: v1alpha1.MetricsConfig{BindAddress: ":9"}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Decode = %+v, want %+v", c, want)
	}
	if c.Metrics.Secure != nil {
		t.Errorf("secure = %v, want nil", ptr.Deref(c.Metrics.Secure, false))
	}
}

// A config file is small; /dev/zero (or any huge file) is refused by size,
// not read until memory runs out.
func TestLoadRefusesHugeFile(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := Load("/dev/zero")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "/dev/zero is larger than the 1048576-byte limit") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Load(/dev/zero) did not return")
	}
}

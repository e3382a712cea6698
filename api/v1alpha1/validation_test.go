package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValidate(t *testing.T) {
	type want struct {
		field string
		typ   field.ErrorType
	}
	tests := []struct {
		name   string
		mutate func(c *OperatorConfig)
		want   []want // empty: valid
	}{
		{"defaults are valid", func(c *OperatorConfig) {}, nil},
		{"everything set is valid", func(c *OperatorConfig) {
			c.ReleaseVersion = "4.18.0-0.nightly-2026-01-01-000000"
			c.WatchedGates = []string{"GatewayAPI", "ExampleGate"}
			c.ManifestsDir = "/manifests"
			c.ClusterProfile = "self-managed-high-availability"
			c.InitialFetchTimeout = dur(time.Minute)
			c.LeaderElection = LeaderElectionConfig{LeaderElect: true, ResourceNamespace: "openshift-foo", ResourceName: "foo.example.com",
				LeaseDuration: dur(15 * time.Second), RenewDeadline: dur(10 * time.Second), RetryPeriod: dur(2 * time.Second)}
			c.ExcludeIdentifier = "hypershift"
			c.MaxManifestSize = ptr.To(resource.MustParse("64Mi"))
			c.Metrics.BindAddress = "0"
			c.Health.BindAddress = "127.0.0.1:0"
		}, nil},
		{"empty apiVersion/kind are accepted", func(c *OperatorConfig) { c.APIVersion, c.Kind = "", "" }, nil},

		{"wrong apiVersion", func(c *OperatorConfig) { c.APIVersion = "v1" }, []want{{"apiVersion", field.ErrorTypeNotSupported}}},
		{"wrong kind", func(c *OperatorConfig) { c.Kind = "Config" }, []want{{"kind", field.ErrorTypeNotSupported}}},

		{"featureGateName empty", func(c *OperatorConfig) { c.FeatureGateName = "" }, []want{{"featureGateName", field.ErrorTypeRequired}}},
		{"featureGateName not a DNS-1123 subdomain", func(c *OperatorConfig) { c.FeatureGateName = "Cluster_1" }, []want{{"featureGateName", field.ErrorTypeInvalid}}},
		{"clusterOperatorName empty", func(c *OperatorConfig) { c.ClusterOperatorName = "" }, []want{{"clusterOperatorName", field.ErrorTypeRequired}}},
		{"clusterOperatorName not a DNS-1123 subdomain", func(c *OperatorConfig) { c.ClusterOperatorName = "-bad" }, []want{{"clusterOperatorName", field.ErrorTypeInvalid}}},
		{"clusterOperatorName too long", func(c *OperatorConfig) { c.ClusterOperatorName = strings.Repeat("a", 254) }, []want{{"clusterOperatorName", field.ErrorTypeInvalid}}},

		{"leaseDuration zero", func(c *OperatorConfig) { c.LeaderElection.LeaseDuration = dur(-1) }, []want{{"leaderElection.leaseDuration", field.ErrorTypeInvalid}}},
		{"renewDeadline not below leaseDuration", func(c *OperatorConfig) { c.LeaderElection.RenewDeadline = c.LeaderElection.LeaseDuration },
			[]want{{"leaderElection.renewDeadline", field.ErrorTypeInvalid}}},
		{"retryPeriod too close to renewDeadline", func(c *OperatorConfig) { c.LeaderElection.RetryPeriod = dur(100 * time.Second) },
			[]want{{"leaderElection.retryPeriod", field.ErrorTypeInvalid}}},
		{"maxManifestSize zero", func(c *OperatorConfig) { c.MaxManifestSize = ptr.To(resource.MustParse("0")) }, []want{{"maxManifestSize", field.ErrorTypeInvalid}}},
		{"maxManifestSize above 64Mi", func(c *OperatorConfig) { c.MaxManifestSize = ptr.To(resource.MustParse("65Mi")) }, []want{{"maxManifestSize", field.ErrorTypeInvalid}}},
		{"excludeIdentifier not an annotation name", func(c *OperatorConfig) { c.ExcludeIdentifier = "a b" }, []want{{"excludeIdentifier", field.ErrorTypeInvalid}}},

		{"releaseVersion with whitespace", func(c *OperatorConfig) { c.ReleaseVersion = "4.18 .0" }, []want{{"releaseVersion", field.ErrorTypeInvalid}}},

		{"watchedGates empty entry", func(c *OperatorConfig) { c.WatchedGates = []string{"A", ""} }, []want{{"watchedGates[1]", field.ErrorTypeRequired}}},
		{"watchedGates duplicate", func(c *OperatorConfig) { c.WatchedGates = []string{"A", "B", "A"} }, []want{{"watchedGates[2]", field.ErrorTypeDuplicate}}},
		{"watchedGates comma", func(c *OperatorConfig) { c.WatchedGates = []string{"A,B"} }, []want{{"watchedGates[0]", field.ErrorTypeInvalid}}},
		{"watchedGates whitespace", func(c *OperatorConfig) { c.WatchedGates = []string{" A"} }, []want{{"watchedGates[0]", field.ErrorTypeInvalid}}},
		{"tlsProfileFrom and a fallback", func(c *OperatorConfig) {
			c.Metrics.TLSProfileFrom, c.Metrics.TLSProfileWhenAbsent = "cluster", "Modern"
		}, nil},
		{"tlsProfileFrom not a name", func(c *OperatorConfig) { c.Metrics.TLSProfileFrom = "Cluster" }, []want{{"metrics.tlsProfileFrom", field.ErrorTypeInvalid}}},
		{"tlsProfileWhenAbsent unknown", func(c *OperatorConfig) {
			c.Metrics.TLSProfileFrom, c.Metrics.TLSProfileWhenAbsent = "cluster", "Custom"
		},
			[]want{{"metrics.tlsProfileWhenAbsent", field.ErrorTypeNotSupported}}},
		{"tlsProfileWhenAbsent alone", func(c *OperatorConfig) { c.Metrics.TLSProfileWhenAbsent = "Modern" }, []want{{"metrics.tlsProfileFrom", field.ErrorTypeRequired}}},
		{"tlsProfileFrom on plain HTTP", func(c *OperatorConfig) { c.Metrics.TLSProfileFrom, c.Metrics.Secure = "cluster", ptr.To(false) },
			[]want{{"metrics.tlsProfileFrom", field.ErrorTypeInvalid}}},

		{"clusterProfile with a slash", func(c *OperatorConfig) { c.ClusterProfile = "a/b" }, []want{{"clusterProfile", field.ErrorTypeInvalid}}},
		{"clusterProfile bad characters", func(c *OperatorConfig) { c.ClusterProfile = "self managed" }, []want{{"clusterProfile", field.ErrorTypeInvalid}}},
		{"clusterProfile too long", func(c *OperatorConfig) { c.ClusterProfile = strings.Repeat("a", 64) }, []want{{"clusterProfile", field.ErrorTypeInvalid}}},
		{"clusterProfile ends with a dash", func(c *OperatorConfig) { c.ClusterProfile = "ibm-" }, []want{{"clusterProfile", field.ErrorTypeInvalid}}},

		{"resyncPeriod zero", func(c *OperatorConfig) { c.ResyncPeriod = dur(0) }, []want{{"resyncPeriod", field.ErrorTypeInvalid}}},
		{"resyncPeriod below 1s", func(c *OperatorConfig) { c.ResyncPeriod = dur(999 * time.Millisecond) }, []want{{"resyncPeriod", field.ErrorTypeInvalid}}},
		{"resyncPeriod exactly 1s", func(c *OperatorConfig) { c.ResyncPeriod = dur(time.Second) }, nil},
		{"resyncPeriod negative", func(c *OperatorConfig) { c.ResyncPeriod = dur(-time.Minute) }, []want{{"resyncPeriod", field.ErrorTypeInvalid}}},
		{"gracefulShutdownTimeout zero", func(c *OperatorConfig) { c.GracefulShutdownTimeout = dur(0) }, []want{{"gracefulShutdownTimeout", field.ErrorTypeInvalid}}},
		{"gracefulShutdownTimeout negative", func(c *OperatorConfig) { c.GracefulShutdownTimeout = dur(-time.Second) }, []want{{"gracefulShutdownTimeout", field.ErrorTypeInvalid}}},
		{"initialFetchBackoffCap zero", func(c *OperatorConfig) { c.InitialFetchBackoffCap = dur(0) }, []want{{"initialFetchBackoffCap", field.ErrorTypeInvalid}}},
		{"initialFetchBackoffCap negative", func(c *OperatorConfig) { c.InitialFetchBackoffCap = dur(-1) }, []want{{"initialFetchBackoffCap", field.ErrorTypeInvalid}}},
		{"initialFetchTimeout zero is forever", func(c *OperatorConfig) { c.InitialFetchTimeout = dur(0) }, nil},
		{"initialFetchTimeout negative", func(c *OperatorConfig) { c.InitialFetchTimeout = dur(-time.Second) }, []want{{"initialFetchTimeout", field.ErrorTypeInvalid}}},
		{"featureGateFreshnessBound below the minimum", func(c *OperatorConfig) { c.FeatureGateFreshnessBound = dur(100 * time.Millisecond) }, []want{{"featureGateFreshnessBound", field.ErrorTypeInvalid}}},
		{"cacheSyncTimeout zero", func(c *OperatorConfig) { c.CacheSyncTimeout = dur(0) }, []want{{"cacheSyncTimeout", field.ErrorTypeInvalid}}},
		{"cacheSyncTimeout negative", func(c *OperatorConfig) { c.CacheSyncTimeout = dur(-time.Second) }, []want{{"cacheSyncTimeout", field.ErrorTypeInvalid}}},

		{"leaderElection.resourceNamespace not a DNS-1123 label", func(c *OperatorConfig) { c.LeaderElection.ResourceNamespace = "a.b" }, []want{{"leaderElection.resourceNamespace", field.ErrorTypeInvalid}}},
		{"leaderElection.resourceName not a DNS-1123 subdomain", func(c *OperatorConfig) { c.LeaderElection.ResourceName = "Lease" }, []want{{"leaderElection.resourceName", field.ErrorTypeInvalid}}},
		{"leaderElection.resourceName empty with leaderElect", func(c *OperatorConfig) {
			c.LeaderElection.LeaderElect = true
			c.LeaderElection.ResourceName = ""
		}, []want{{"leaderElection.resourceName", field.ErrorTypeRequired}}},
		{"leaderElection.resourceName empty without leaderElect", func(c *OperatorConfig) { c.LeaderElection.ResourceName = "" }, nil},

		{"metrics.bindAddress empty", func(c *OperatorConfig) { c.Metrics.BindAddress = "" }, []want{{"metrics.bindAddress", field.ErrorTypeRequired}}},
		{"metrics.bindAddress no port", func(c *OperatorConfig) { c.Metrics.BindAddress = "localhost" }, []want{{"metrics.bindAddress", field.ErrorTypeInvalid}}},
		{"metrics.bindAddress port out of range", func(c *OperatorConfig) { c.Metrics.BindAddress = ":70000" }, []want{{"metrics.bindAddress", field.ErrorTypeInvalid}}},
		{"health.bindAddress named port", func(c *OperatorConfig) { c.Health.BindAddress = ":http" }, []want{{"health.bindAddress", field.ErrorTypeInvalid}}},
		{"health.bindAddress disabled", func(c *OperatorConfig) { c.Health.BindAddress = "0" }, nil},

		{"several errors are all reported", func(c *OperatorConfig) {
			c.FeatureGateName = "BAD"
			c.ResyncPeriod = dur(0)
			c.WatchedGates = []string{"x", "x"}
			c.Health.BindAddress = "nope"
		}, []want{
			{"featureGateName", field.ErrorTypeInvalid},
			{"watchedGates[1]", field.ErrorTypeDuplicate},
			{"resyncPeriod", field.ErrorTypeInvalid},
			{"health.bindAddress", field.ErrorTypeInvalid},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewDefaultOperatorConfig()
			tt.mutate(c)
			errs := c.Validate()
			var got []want
			for _, e := range errs {
				got = append(got, want{e.Field, e.Type})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Validate() = %v, want errors %v", errs, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("error %d = %v (%v), want %v", i, got[i], errs[i], tt.want[i])
				}
				if !strings.HasPrefix(errs[i].Error(), tt.want[i].field+":") {
					t.Errorf("error %q does not start with the field path %q", errs[i].Error(), tt.want[i].field)
				}
			}
		})
	}
}

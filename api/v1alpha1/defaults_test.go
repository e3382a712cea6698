package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func fullyDefaulted() *OperatorConfig {
	return &OperatorConfig{
		TypeMeta:                  metav1.TypeMeta{APIVersion: "operator.featuregate-operator.io/v1alpha1", Kind: "OperatorConfig"},
		FeatureGateName:           "cluster",
		ClusterOperatorName:       "featuregate-operator",
		ResyncPeriod:              dur(3 * time.Minute),
		GracefulShutdownTimeout:   dur(30 * time.Second),
		InitialFetchBackoffCap:    dur(2 * time.Second),
		InitialFetchTimeout:       dur(0),
		CacheSyncTimeout:          dur(2 * time.Minute),
		FeatureGateFreshnessBound: dur(2 * time.Second),
		MaxManifestSize:           ptr.To(resource.MustParse("3Mi")),
		LeaderElection: LeaderElectionConfig{ResourceName: "featuregate-operator.featuregate-operator.io",
			LeaseDuration: dur(137 * time.Second), RenewDeadline: dur(107 * time.Second), RetryPeriod: dur(26 * time.Second)},
		Metrics: MetricsConfig{BindAddress: ":8443", Secure: ptr.To(true)},
		Health:  HealthConfig{BindAddress: ":8081"},
	}
}

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *OperatorConfig
		want func() *OperatorConfig
	}{{
		name: "empty gets every default",
		in:   &OperatorConfig{},
		want: fullyDefaulted,
	}, {
		name: "set fields are kept",
		in: &OperatorConfig{
			FeatureGateName:           "other",
			ReleaseVersion:            "4.18.0",
			WatchedGates:              []string{"A"},
			ManifestsDir:              "/m",
			ClusterProfile:            "p",
			ClusterOperatorName:       "co",
			ResyncPeriod:              dur(time.Minute),
			GracefulShutdownTimeout:   dur(5 * time.Second),
			InitialFetchBackoffCap:    dur(time.Second),
			InitialFetchTimeout:       dur(time.Hour),
			CacheSyncTimeout:          dur(time.Second),
			FeatureGateFreshnessBound: dur(time.Second),
			ExcludeIdentifier:         "hypershift",
			MaxManifestSize:           ptr.To(resource.MustParse("1Mi")),
			LeaderElection: LeaderElectionConfig{LeaderElect: true, ResourceNamespace: "ns", ResourceName: "lease",
				LeaseDuration: dur(15 * time.Second), RenewDeadline: dur(10 * time.Second), RetryPeriod: dur(2 * time.Second)},
			Metrics: MetricsConfig{BindAddress: "0", Secure: ptr.To(false)},
			Health:  HealthConfig{BindAddress: ":9000"},
		},
		want: func() *OperatorConfig {
			return &OperatorConfig{
				TypeMeta:                  fullyDefaulted().TypeMeta,
				FeatureGateName:           "other",
				ReleaseVersion:            "4.18.0",
				WatchedGates:              []string{"A"},
				ManifestsDir:              "/m",
				ClusterProfile:            "p",
				ClusterOperatorName:       "co",
				ResyncPeriod:              dur(time.Minute),
				GracefulShutdownTimeout:   dur(5 * time.Second),
				InitialFetchBackoffCap:    dur(time.Second),
				InitialFetchTimeout:       dur(time.Hour),
				CacheSyncTimeout:          dur(time.Second),
				FeatureGateFreshnessBound: dur(time.Second),
				ExcludeIdentifier:         "hypershift",
				MaxManifestSize:           ptr.To(resource.MustParse("1Mi")),
				LeaderElection: LeaderElectionConfig{LeaderElect: true, ResourceNamespace: "ns", ResourceName: "lease",
					LeaseDuration: dur(15 * time.Second), RenewDeadline: dur(10 * time.Second), RetryPeriod: dur(2 * time.Second)},
				Metrics: MetricsConfig{BindAddress: "0", Secure: ptr.To(false)},
				Health:  HealthConfig{BindAddress: ":9000"},
			}
		},
	}, {
		name: "secure=false is not overridden by the true default",
		in:   &OperatorConfig{Metrics: MetricsConfig{Secure: ptr.To(false)}},
		want: func() *OperatorConfig {
			c := fullyDefaulted()
			c.Metrics.Secure = ptr.To(false)
			return c
		},
	}, {
		name: "zero durations take the default",
		in:   &OperatorConfig{ResyncPeriod: dur(0), GracefulShutdownTimeout: dur(0)},
		want: fullyDefaulted,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.DeepCopy()
			SetDefaults_OperatorConfig(got)
			if want := tt.want(); !reflect.DeepEqual(got, want) {
				t.Errorf("SetDefaults_OperatorConfig:\n got %+v\nwant %+v", got, want)
			}
			again := got.DeepCopy()
			again.Default()
			if !reflect.DeepEqual(got, again) {
				t.Errorf("defaulting is not idempotent:\n got %+v\nthen %+v", got, again)
			}
		})
	}
}

func TestNewDefaultOperatorConfigIsValid(t *testing.T) {
	c := NewDefaultOperatorConfig()
	if !reflect.DeepEqual(c, fullyDefaulted()) {
		t.Errorf("NewDefaultOperatorConfig() = %+v", c)
	}
	if errs := c.Validate(); len(errs) > 0 {
		t.Errorf("defaults are invalid: %v", errs)
	}
	if !c.MetricsSecure() || !(&OperatorConfig{}).MetricsSecure() {
		t.Error("MetricsSecure() should be true by default")
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gvk := GroupVersion.WithKind("OperatorConfig")
	if !s.Recognizes(gvk) {
		t.Fatalf("scheme does not recognize %v", gvk)
	}
	obj, err := s.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	s.Default(obj)
	if got := obj.(*OperatorConfig).FeatureGateName; got != "cluster" {
		t.Errorf("scheme.Default: featureGateName = %q, want cluster", got)
	}
	if GroupVersion.String() != "operator.featuregate-operator.io/v1alpha1" {
		t.Errorf("GroupVersion = %v", GroupVersion)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	c := fullyDefaulted()
	c.WatchedGates = []string{"A"}
	cp := c.DeepCopyObject().(*OperatorConfig)
	cp.WatchedGates[0] = "B"
	*cp.Metrics.Secure = false
	if c.WatchedGates[0] != "A" || !*c.Metrics.Secure {
		t.Error("DeepCopy shares memory with the original")
	}
	if !strings.HasPrefix(c.APIVersion, GroupName) {
		t.Errorf("apiVersion %q", c.APIVersion)
	}
}

// The API's defaults for the guard's settings are the guard's: an
// OperatorConfig left empty configures the same guard as an adopter's
// zero Options.
func TestGuardDefaultsAreTheGuards(t *testing.T) {
	d := featuregate.Defaults()
	for name, pair := range map[string][2]any{
		"FeatureGateName":        {DefaultFeatureGateName, d.Name},
		"ResyncPeriod":           {DefaultResyncPeriod, d.ResyncPeriod},
		"InitialFetchBackoffCap": {DefaultInitialFetchBackoffCap, d.BackoffCap},
		"CacheSyncTimeout":       {DefaultCacheSyncTimeout, d.CacheSyncTimeout},
		"FreshnessBound":         {DefaultFreshnessBound, d.FreshnessBound},
	} {
		if pair[0] != pair[1] {
			t.Errorf("default %s is %v here, %v in featuregate.Defaults()", name, pair[0], pair[1])
		}
	}
}

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Default values of OperatorConfig fields that configure the FeatureGate
// guard. They are the guard's own defaults (featuregate.Defaults), written
// here again so that the API imports nothing of the product; a test keeps
// the two equal.
const (
	DefaultFeatureGateName        = "cluster"
	DefaultResyncPeriod           = 3 * time.Minute
	DefaultInitialFetchBackoffCap = 2 * time.Second
	DefaultCacheSyncTimeout       = 2 * time.Minute
	DefaultFreshnessBound         = 2 * time.Second
)

// MinFreshnessBound is the shortest featureGateFreshnessBound: the guard
// sends a consistent read every half bound, and a round trip to etcd must
// fit in the other half.
const MinFreshnessBound = 200 * time.Millisecond

// Default values of the other OperatorConfig fields.
const (
	DefaultClusterOperatorName      = "featuregate-operator"
	DefaultGracefulShutdownTimeout  = 30 * time.Second
	DefaultInitialFetchTimeout      = time.Duration(0) // forever
	DefaultLeaderElect              = false
	DefaultLeaderElectionResourceID = "featuregate-operator.featuregate-operator.io"
	DefaultLeaseDuration            = 137 * time.Second
	DefaultRenewDeadline            = 107 * time.Second
	DefaultRetryPeriod              = 26 * time.Second
	DefaultMaxManifestSize          = "3Mi"
	DefaultMetricsBindAddress       = ":8443"
	DefaultMetricsSecure            = true
	DefaultHealthProbeBindAddress   = ":8081"
)

// SetDefaults_OperatorConfig fills every unset (zero) field of cfg with its
// default, and sets apiVersion/kind if they are empty. Fields already set are
// left alone, so defaulting is idempotent.
func SetDefaults_OperatorConfig(cfg *OperatorConfig) { //nolint:revive,staticcheck // kube naming convention
	if cfg.APIVersion == "" {
		cfg.APIVersion = GroupVersion.String()
	}
	if cfg.Kind == "" {
		cfg.Kind = OperatorConfigKind
	}
	if cfg.FeatureGateName == "" {
		cfg.FeatureGateName = DefaultFeatureGateName
	}
	if cfg.ClusterOperatorName == "" {
		cfg.ClusterOperatorName = DefaultClusterOperatorName
	}
	defaultDuration(&cfg.ResyncPeriod, DefaultResyncPeriod)
	defaultDuration(&cfg.GracefulShutdownTimeout, DefaultGracefulShutdownTimeout)
	defaultDuration(&cfg.InitialFetchBackoffCap, DefaultInitialFetchBackoffCap)
	defaultDuration(&cfg.InitialFetchTimeout, DefaultInitialFetchTimeout)
	defaultDuration(&cfg.CacheSyncTimeout, DefaultCacheSyncTimeout)
	defaultDuration(&cfg.FeatureGateFreshnessBound, DefaultFreshnessBound)
	if cfg.LeaderElection.ResourceName == "" {
		cfg.LeaderElection.ResourceName = DefaultLeaderElectionResourceID
	}
	defaultDuration(&cfg.LeaderElection.LeaseDuration, DefaultLeaseDuration)
	defaultDuration(&cfg.LeaderElection.RenewDeadline, DefaultRenewDeadline)
	defaultDuration(&cfg.LeaderElection.RetryPeriod, DefaultRetryPeriod)
	if cfg.MaxManifestSize == nil {
		size := resource.MustParse(DefaultMaxManifestSize)
		cfg.MaxManifestSize = &size
	}
	if cfg.Metrics.BindAddress == "" {
		cfg.Metrics.BindAddress = DefaultMetricsBindAddress
	}
	if cfg.Metrics.Secure == nil {
		secure := DefaultMetricsSecure
		cfg.Metrics.Secure = &secure
	}
	if cfg.Health.BindAddress == "" {
		cfg.Health.BindAddress = DefaultHealthProbeBindAddress
	}
}

func defaultDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// Default sets the defaults of every unset field; see
// SetDefaults_OperatorConfig.
func (c *OperatorConfig) Default() {
	SetDefaults_OperatorConfig(c)
}

// NewDefaultOperatorConfig returns an OperatorConfig with every field
// defaulted.
func NewDefaultOperatorConfig() *OperatorConfig {
	cfg := &OperatorConfig{}
	cfg.Default()
	return cfg
}

// MetricsSecure reports whether the metrics endpoint is served securely:
// Metrics.Secure, or its default when unset.
func (c *OperatorConfig) MetricsSecure() bool {
	if c.Metrics.Secure == nil {
		return DefaultMetricsSecure
	}
	return *c.Metrics.Secure
}

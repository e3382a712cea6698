package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorConfigKind is the kind of OperatorConfig.
const OperatorConfigKind = "OperatorConfig"

// OperatorConfig is the configuration file of featuregate-operator, given to
// the manager with --config. Every field is optional; an omitted field (or
// its zero value) takes the default documented on it. Flags given explicitly
// on the command line override the values read from the file.
//
// +kubebuilder:object:root=true
type OperatorConfig struct {
	metav1.TypeMeta `json:",inline"`

	// featureGateName is the name of the cluster-scoped
	// config.openshift.io/v1 FeatureGate object to read and watch.
	// Default: "cluster".
	// +optional
	FeatureGateName string `json:"featureGateName,omitempty"`

	// featureGateFile, when set, is read instead of the API: a file holding
	// the FeatureGate as YAML or JSON, as a ConfigMap volume presents it
	// (HyperShift renders it so; MicroShift serves no FeatureGate API). It
	// is read and followed with the same discipline as the API object.
	// +optional
	FeatureGateFile string `json:"featureGateFile,omitempty"`

	// releaseVersion is the release (payload) version this operator belongs
	// to; the feature gates are read for this version and it is reported in
	// the ClusterOperator status. The version marker, "0.0.1-snapshot" (what
	// a release payload substitutes), means the cluster's own release
	// version, read from its ClusterVersion. Empty: not known.
	// +optional
	ReleaseVersion string `json:"releaseVersion,omitempty"`

	// watchedGates are the names of the feature gates this operator cares
	// about: a change in the enablement of one of them makes the operator
	// restart to pick it up. Empty: every gate of the release version.
	// +optional
	WatchedGates []string `json:"watchedGates,omitempty"`

	// manifestsDir is the directory of manifests to apply. Empty: apply
	// nothing.
	// +optional
	ManifestsDir string `json:"manifestsDir,omitempty"`

	// clusterProfile selects the manifests annotated
	// include.release.openshift.io/<clusterProfile>. Empty: no profile
	// filtering.
	// +optional
	ClusterProfile string `json:"clusterProfile,omitempty"`

	// excludeIdentifier excludes the manifests annotated
	// exclude.release.openshift.io/<excludeIdentifier>: "true", as the
	// cluster-version-operator's --exclude does. Empty: no such filter.
	// +optional
	ExcludeIdentifier string `json:"excludeIdentifier,omitempty"`

	// maxManifestSize bounds each manifest file; a larger file is refused,
	// named with its size, and the rest of the payload still applies. The
	// API server stores no object above about 1.5 MiB, and decoding costs a
	// multiple of a file's size. Default: 3Mi; at most 64Mi.
	// +optional
	MaxManifestSize *resource.Quantity `json:"maxManifestSize,omitempty"`

	// clusterOperatorName is the name of the config.openshift.io/v1
	// ClusterOperator that reports this operator's status.
	// Default: "featuregate-operator".
	// +optional
	ClusterOperatorName string `json:"clusterOperatorName,omitempty"`

	// resyncPeriod is how often the informers resync. At least 1s.
	// Default (also when 0): 3m.
	// +optional
	ResyncPeriod metav1.Duration `json:"resyncPeriod,omitempty"`

	// gracefulShutdownTimeout bounds how long the manager waits for its
	// runnables to stop. It must stay below the pod's
	// terminationGracePeriodSeconds. Default (also when 0): 30s.
	// +optional
	GracefulShutdownTimeout metav1.Duration `json:"gracefulShutdownTimeout,omitempty"`

	// initialFetchBackoffCap caps the exponential backoff between attempts to
	// read the FeatureGate at start. Default (also when 0): 2s.
	// +optional
	InitialFetchBackoffCap metav1.Duration `json:"initialFetchBackoffCap,omitempty"`

	// initialFetchTimeout bounds how long the operator tries to read the
	// FeatureGate at start before giving up. Default: 0, which means try
	// forever.
	// +optional
	InitialFetchTimeout metav1.Duration `json:"initialFetchTimeout,omitempty"`

	// featureGateFreshnessBound is how old the guard's proof that the
	// FeatureGate still matches the startup snapshot may be while the
	// operator acts on it: no manifest is applied and no status written on
	// older proof. Default (also when 0): 2s.
	// +optional
	FeatureGateFreshnessBound metav1.Duration `json:"featureGateFreshnessBound,omitempty"`

	// cacheSyncTimeout bounds how long a controller waits for its caches to
	// sync. Default (also when 0): 2m.
	// +optional
	CacheSyncTimeout metav1.Duration `json:"cacheSyncTimeout,omitempty"`

	// leaderElection configures leader election of the manager.
	// +optional
	LeaderElection LeaderElectionConfig `json:"leaderElection,omitempty"`

	// metrics configures the metrics endpoint.
	// +optional
	Metrics MetricsConfig `json:"metrics,omitempty"`

	// health configures the health probe endpoint.
	// +optional
	Health HealthConfig `json:"health,omitempty"`
}

// LeaderElectionConfig configures leader election.
type LeaderElectionConfig struct {
	// leaderElect enables leader election, so that only one replica acts at a
	// time. Default: false.
	// +optional
	LeaderElect bool `json:"leaderElect,omitempty"`

	// resourceNamespace is the namespace of the election Lease. Empty: the
	// namespace the manager runs in.
	// +optional
	ResourceNamespace string `json:"resourceNamespace,omitempty"`

	// resourceName is the name of the election Lease.
	// Default: "featuregate-operator.featuregate-operator.io".
	// +optional
	ResourceName string `json:"resourceName,omitempty"`

	// leaseDuration is how long a lease is valid without renewal: how long
	// other replicas wait for a leader that died without releasing it.
	// Default: 137s (OpenShift's, tolerating an API outage of about two
	// minutes without a leader change).
	// +optional
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`

	// renewDeadline is how long the leader keeps trying to renew before it
	// gives up leadership and exits. Shorter than leaseDuration. An API
	// outage longer than this restarts the leader. Default: 107s.
	// +optional
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`

	// retryPeriod is the interval between attempts to acquire or renew.
	// renewDeadline must be more than 1.2 times it. Default: 26s.
	// +optional
	RetryPeriod metav1.Duration `json:"retryPeriod,omitempty"`
}

// MetricsConfig configures the metrics endpoint.
type MetricsConfig struct {
	// bindAddress is the host:port the metrics endpoint listens on; "0"
	// disables it. Default: ":8443".
	// +optional
	BindAddress string `json:"bindAddress,omitempty"`

	// secure serves the metrics endpoint over HTTPS with authentication and
	// authorization (TokenReview/SubjectAccessReview); false serves plain
	// HTTP. Default: true.
	// +optional
	Secure *bool `json:"secure,omitempty"`

	// tlsProfileFrom names the APIServer (config.openshift.io/v1) whose TLS
	// security profile the secure endpoint serves. It is read into the
	// startup snapshot with the FeatureGate: the operator is not ready and
	// serves no handshake until it is read, and restarts when what it
	// serves with changes. The profile is honoured as OpenShift's
	// spec.tlsAdherence says for components that did not honour it before
	// (only under StrictAllComponents); otherwise the endpoint keeps its
	// own settings. Empty: the APIServer is not read. Default: empty; the
	// shipped config sets "cluster".
	// +optional
	TLSProfileFrom string `json:"tlsProfileFrom,omitempty"`

	// tlsProfileWhenAbsent is the profile served when the cluster has no
	// such APIServer or serves no APIServer API (MicroShift): Old,
	// Intermediate or Modern. Empty: wait for the APIServer, not ready.
	// +optional
	TLSProfileWhenAbsent string `json:"tlsProfileWhenAbsent,omitempty"`
}

// HealthConfig configures the health probe endpoint (/healthz, /readyz).
type HealthConfig struct {
	// bindAddress is the host:port the health probes listen on; "0" disables
	// them. Default: ":8081".
	// +optional
	BindAddress string `json:"bindAddress,omitempty"`
}

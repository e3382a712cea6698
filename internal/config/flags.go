package config

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/featuregate-operator/operator/api/v1alpha1"
)

// FlagConfig is the name of the flag giving the OperatorConfig file.
const FlagConfig = "config"

// Names of the flags that override OperatorConfig fields.
const (
	FlagFeatureGateName         = "feature-gate-name"
	FlagFeatureGateFile         = "feature-gate-file"
	FlagReleaseVersion          = "release-version"
	FlagWatchedGates            = "watched-gates"
	FlagManifestsDir            = "manifests-dir"
	FlagClusterProfile          = "cluster-profile"
	FlagClusterOperatorName     = "cluster-operator-name"
	FlagResyncPeriod            = "resync-period"
	FlagGracefulShutdownTimeout = "graceful-shutdown-timeout"
	FlagInitialFetchBackoffCap  = "initial-fetch-backoff-cap"
	FlagInitialFetchTimeout     = "initial-fetch-timeout"
	FlagCacheSyncTimeout        = "cache-sync-timeout"
	FlagFreshnessBound          = "featuregate-freshness-bound"
	FlagLeaderElect             = "leader-elect"
	FlagLeaderElectionNamespace = "leader-election-namespace"
	FlagLeaderElectionID        = "leader-election-id"
	FlagLeaseDuration           = "leader-elect-lease-duration"
	FlagRenewDeadline           = "leader-elect-renew-deadline"
	FlagRetryPeriod             = "leader-elect-retry-period"
	FlagExcludeIdentifier       = "exclude-identifier"
	FlagMaxManifestSize         = "max-manifest-size"
	FlagMetricsBindAddress      = "metrics-bind-address"
	FlagMetricsSecure           = "metrics-secure"
	FlagHealthProbeBindAddress  = "health-probe-bind-address"
)

// flagSpec ties a flag to the OperatorConfig field it overrides.
type flagSpec struct {
	name  string
	path  string // JSON path of the field in the file
	usage string
	// field returns a pointer to the field in c: *string, *bool, **bool,
	// *[]string or *time.Duration.
	field func(c *v1alpha1.OperatorConfig) any
}

var flagSpecs = []flagSpec{
	{FlagFeatureGateName, "featureGateName", "Name of the cluster-scoped FeatureGate to read and watch.",
		func(c *v1alpha1.OperatorConfig) any { return &c.FeatureGateName }},
	{FlagFeatureGateFile, "featureGateFile", "File holding the FeatureGate (YAML or JSON, e.g. a mounted ConfigMap), read instead of the API (empty: the API).",
		func(c *v1alpha1.OperatorConfig) any { return &c.FeatureGateFile }},
	{FlagReleaseVersion, "releaseVersion", "Release version this operator belongs to; feature gates are read for it (the version marker 0.0.1-snapshot: the cluster's own, from its ClusterVersion).",
		func(c *v1alpha1.OperatorConfig) any { return &c.ReleaseVersion }},
	{FlagWatchedGates, "watchedGates", "Comma-separated `list` of feature gates whose change restarts the operator (empty: all).",
		func(c *v1alpha1.OperatorConfig) any { return &c.WatchedGates }},
	{FlagManifestsDir, "manifestsDir", "Directory of manifests to apply (empty: apply nothing).",
		func(c *v1alpha1.OperatorConfig) any { return &c.ManifestsDir }},
	{FlagClusterProfile, "clusterProfile", "Cluster profile: apply only manifests annotated include.release.openshift.io/<profile> (empty: no filtering).",
		func(c *v1alpha1.OperatorConfig) any { return &c.ClusterProfile }},
	{FlagClusterOperatorName, "clusterOperatorName", "Name of the ClusterOperator reporting this operator's status.",
		func(c *v1alpha1.OperatorConfig) any { return &c.ClusterOperatorName }},
	{FlagResyncPeriod, "resyncPeriod", "Informer resync period (at least 1s).",
		func(c *v1alpha1.OperatorConfig) any { return &c.ResyncPeriod.Duration }},
	{FlagGracefulShutdownTimeout, "gracefulShutdownTimeout", "How long the manager waits for its runnables to stop.",
		func(c *v1alpha1.OperatorConfig) any { return &c.GracefulShutdownTimeout.Duration }},
	{FlagInitialFetchBackoffCap, "initialFetchBackoffCap", "Cap of the backoff between attempts to read the FeatureGate at start.",
		func(c *v1alpha1.OperatorConfig) any { return &c.InitialFetchBackoffCap.Duration }},
	{FlagInitialFetchTimeout, "initialFetchTimeout", "How long to try reading the FeatureGate at start (0: forever).",
		func(c *v1alpha1.OperatorConfig) any { return &c.InitialFetchTimeout.Duration }},
	{FlagCacheSyncTimeout, "cacheSyncTimeout", "How long a controller waits for its caches to sync.",
		func(c *v1alpha1.OperatorConfig) any { return &c.CacheSyncTimeout.Duration }},
	{FlagFreshnessBound, "featureGateFreshnessBound", "How old the proof that the FeatureGate still matches the snapshot may be while the operator acts on it.",
		func(c *v1alpha1.OperatorConfig) any { return &c.FeatureGateFreshnessBound.Duration }},
	{FlagLeaderElect, "leaderElection.leaderElect", "Enable leader election, so that only one replica is active.",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.LeaderElect }},
	{FlagLeaderElectionNamespace, "leaderElection.resourceNamespace", "Namespace of the leader election Lease (empty: the manager's namespace).",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.ResourceNamespace }},
	{FlagLeaderElectionID, "leaderElection.resourceName", "Name of the leader election Lease.",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.ResourceName }},
	{FlagLeaseDuration, "leaderElection.leaseDuration", "How long other replicas wait for a leader that stopped renewing.",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.LeaseDuration.Duration }},
	{FlagRenewDeadline, "leaderElection.renewDeadline", "How long the leader retries renewing before it exits; an API outage longer than this restarts it.",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.RenewDeadline.Duration }},
	{FlagRetryPeriod, "leaderElection.retryPeriod", "Interval between attempts to acquire or renew the lease.",
		func(c *v1alpha1.OperatorConfig) any { return &c.LeaderElection.RetryPeriod.Duration }},
	{FlagExcludeIdentifier, "excludeIdentifier", `Exclude manifests annotated exclude.release.openshift.io/<identifier>: "true" (empty: no such filter).`,
		func(c *v1alpha1.OperatorConfig) any { return &c.ExcludeIdentifier }},
	{FlagMaxManifestSize, "maxManifestSize", "Largest manifest file read, as a quantity (e.g. 3Mi); larger files are refused, named in Degraded.",
		func(c *v1alpha1.OperatorConfig) any { return &c.MaxManifestSize }},
	{FlagMetricsBindAddress, "metrics.bindAddress", `Address the metrics endpoint binds to ("0" disables it).`,
		func(c *v1alpha1.OperatorConfig) any { return &c.Metrics.BindAddress }},
	{FlagMetricsSecure, "metrics.secure", "Serve metrics over HTTPS with authentication and authorization (false: plain HTTP).",
		func(c *v1alpha1.OperatorConfig) any { return &c.Metrics.Secure }},
	{FlagHealthProbeBindAddress, "health.bindAddress", `Address the health probe endpoint binds to ("0" disables it).`,
		func(c *v1alpha1.OperatorConfig) any { return &c.Health.BindAddress }},
}

// Flags holds the values of the flags registered by BindFlags.
type Flags struct {
	fs         *flag.FlagSet
	configFile string
	values     *v1alpha1.OperatorConfig
}

// BindFlags registers on fs the --config flag and one flag per
// OperatorConfig field (FlagFeatureGateName and the others), whose defaults
// are the OperatorConfig defaults. The flags write into a staging config, not
// into the final one: after fs.Parse, call Complete.
//
// fs must not already define any of these names (flag panics on a
// redefinition).
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, values: v1alpha1.NewDefaultOperatorConfig()}
	fs.StringVar(&f.configFile, FlagConfig, "",
		"Path of an OperatorConfig file ("+v1alpha1.GroupVersion.String()+"). Flags given explicitly override its values.")
	for _, s := range flagSpecs {
		usage := fmt.Sprintf("%s (config file field: %s)", s.usage, s.path)
		switch p := s.field(f.values).(type) {
		case *string:
			fs.StringVar(p, s.name, *p, usage)
		case *bool:
			fs.BoolVar(p, s.name, *p, usage)
		case **bool:
			fs.BoolVar(*p, s.name, **p, usage) // non-nil: values is defaulted
		case *time.Duration:
			fs.DurationVar(p, s.name, *p, usage)
		case *[]string:
			fs.Var(&stringList{p: p}, s.name, usage)
		case **resource.Quantity:
			fs.Var(quantity{p: p}, s.name, usage) // non-nil: values is defaulted
		default:
			panic(fmt.Sprintf("config: flag %s: unsupported field type %T", s.name, p))
		}
	}
	return f
}

// ConfigFile is the value of --config: "" when not given.
func (f *Flags) ConfigFile() string { return f.configFile }

// Complete builds the effective configuration once the flag set is parsed:
// the --config file if given (decoded strictly, see Decode), else an empty
// OperatorConfig; then the defaults; then the value of every flag given
// explicitly on the command line (see Merge); then Validate. Validation
// errors name the field and, where a flag set it, the flag.
func (f *Flags) Complete() (*v1alpha1.OperatorConfig, error) {
	if !f.fs.Parsed() {
		return nil, errors.New("config: Complete called before the flags were parsed")
	}
	cfg := &v1alpha1.OperatorConfig{}
	source := "command-line flags"
	if f.configFile != "" {
		var err error
		if cfg, err = decodeFile(f.configFile); err != nil {
			return nil, err
		}
		source = fmt.Sprintf("config file %q and command-line flags", f.configFile)
	}
	cfg.Default()
	set := Merge(cfg, f.values, f.fs)
	if errs := cfg.Validate(); len(errs) > 0 {
		for _, e := range errs {
			if name, ok := set[pathRoot(e.Field)]; ok {
				e.Detail = strings.TrimPrefix(e.Detail+"; set by flag --"+name, "; ")
			}
		}
		return nil, fmt.Errorf("invalid configuration (%s): %w", source, errs.ToAggregate())
	}
	return cfg, nil
}

// Merge copies into dst, from src, the field of every OperatorConfig flag
// that was set explicitly on fs (fs.Visit); flags left at their default, and
// flags that are not OperatorConfig flags, change nothing. src is the config
// the flags were bound to. Merge returns the overridden fields: JSON field
// path -> flag name.
func Merge(dst, src *v1alpha1.OperatorConfig, fs *flag.FlagSet) map[string]string {
	byName := make(map[string]flagSpec, len(flagSpecs))
	for _, s := range flagSpecs {
		byName[s.name] = s
	}
	set := map[string]string{}
	fs.Visit(func(fl *flag.Flag) {
		s, ok := byName[fl.Name]
		if !ok {
			return
		}
		set[s.path] = s.name
		switch d := s.field(dst).(type) {
		case *string:
			*d = *s.field(src).(*string)
		case *bool:
			*d = *s.field(src).(*bool)
		case **bool:
			var v bool
			if p := *s.field(src).(**bool); p != nil {
				v = *p
			}
			*d = &v
		case *time.Duration:
			*d = *s.field(src).(*time.Duration)
		case *[]string:
			*d = slices.Clone(*s.field(src).(*[]string))
		case **resource.Quantity:
			if q := *s.field(src).(**resource.Quantity); q != nil {
				*d = new(q.DeepCopy())
			}
		}
	})
	return set
}

// pathRoot strips a list index from a field path: "watchedGates[1]" ->
// "watchedGates".
func pathRoot(p string) string {
	if i := strings.IndexByte(p, '['); i >= 0 {
		return p[:i]
	}
	return p
}

// stringList is a comma-separated list flag. The first Set replaces the
// default; later ones (the flag repeated) append. An empty value gives an
// empty list.
type stringList struct {
	p   *[]string
	set bool
}

var _ flag.Value = &stringList{}

func (l *stringList) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *stringList) Set(v string) error {
	var items []string
	if strings.TrimSpace(v) != "" {
		for item := range strings.SplitSeq(v, ",") {
			items = append(items, strings.TrimSpace(item))
		}
	}
	if !l.set {
		*l.p = nil
		l.set = true
	}
	*l.p = append(*l.p, items...)
	return nil
}

// quantity is a flag holding a resource.Quantity ("3Mi", "1048576").
type quantity struct{ p **resource.Quantity }

var _ flag.Value = quantity{}

func (q quantity) String() string {
	if q.p == nil || *q.p == nil {
		return ""
	}
	return (*q.p).String()
}

func (q quantity) Set(v string) error {
	parsed, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	*q.p = &parsed
	return nil
}

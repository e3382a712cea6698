package v1alpha1

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinResyncPeriod is the smallest allowed resyncPeriod.
const MinResyncPeriod = time.Second

// ClusterProfileAnnotationPrefix is the prefix of the annotation that selects
// manifests for a cluster profile: <prefix><clusterProfile>.
const ClusterProfileAnnotationPrefix = "include.release.openshift.io/"

// Validate checks a (defaulted) OperatorConfig. Each error's field path is the
// JSON path of the field in the file, such as "resyncPeriod" or
// "leaderElection.resourceName". Validate does not default: an empty required
// field (one left empty by an explicit flag, say) is an error.
func (c *OperatorConfig) Validate() field.ErrorList {
	var errs field.ErrorList

	if c.APIVersion != "" && c.APIVersion != GroupVersion.String() {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{GroupVersion.String()}))
	}
	if c.Kind != "" && c.Kind != OperatorConfigKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{OperatorConfigKind}))
	}

	errs = append(errs, validateDNS1123Subdomain(field.NewPath("featureGateName"), c.FeatureGateName)...)
	errs = append(errs, validateDNS1123Subdomain(field.NewPath("clusterOperatorName"), c.ClusterOperatorName)...)

	if strings.IndexFunc(c.ReleaseVersion, unicode.IsSpace) >= 0 {
		errs = append(errs, field.Invalid(field.NewPath("releaseVersion"), c.ReleaseVersion, "must not contain whitespace"))
	}

	errs = append(errs, validateWatchedGates(field.NewPath("watchedGates"), c.WatchedGates)...)

	if c.ClusterProfile != "" {
		p := field.NewPath("clusterProfile")
		if strings.Contains(c.ClusterProfile, "/") {
			errs = append(errs, field.Invalid(p, c.ClusterProfile, "must not contain '/': it is the name segment of the annotation key "+ClusterProfileAnnotationPrefix+"<clusterProfile>"))
		} else {
			for _, msg := range validation.IsQualifiedName(ClusterProfileAnnotationPrefix + c.ClusterProfile) {
				errs = append(errs, field.Invalid(p, c.ClusterProfile, "must be a valid annotation key name segment: "+msg))
			}
		}
	}

	errs = append(errs, validateMinDuration(field.NewPath("resyncPeriod"), c.ResyncPeriod, MinResyncPeriod)...)
	errs = append(errs, validatePositiveDuration(field.NewPath("gracefulShutdownTimeout"), c.GracefulShutdownTimeout)...)
	errs = append(errs, validatePositiveDuration(field.NewPath("initialFetchBackoffCap"), c.InitialFetchBackoffCap)...)
	if c.InitialFetchTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("initialFetchTimeout"), c.InitialFetchTimeout.Duration.String(), "must not be negative (0 means no timeout)"))
	}
	errs = append(errs, validatePositiveDuration(field.NewPath("cacheSyncTimeout"), c.CacheSyncTimeout)...)
	errs = append(errs, validateMinDuration(field.NewPath("featureGateFreshnessBound"), c.FeatureGateFreshnessBound, MinFreshnessBound)...)

	le := field.NewPath("leaderElection")
	if ns := c.LeaderElection.ResourceNamespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(le.Child("resourceNamespace"), ns, msg))
		}
	}
	if name := c.LeaderElection.ResourceName; name != "" || c.LeaderElection.LeaderElect {
		errs = append(errs, validateDNS1123Subdomain(le.Child("resourceName"), name)...)
	}

	errs = append(errs, validateLeaseTimings(le, c.LeaderElection)...)
	errs = append(errs, validateMaxManifestSize(field.NewPath("maxManifestSize"), c.MaxManifestSize)...)
	if id := c.ExcludeIdentifier; id != "" {
		// It becomes the name part of an annotation key.
		for _, msg := range validation.IsQualifiedName(id) {
			errs = append(errs, field.Invalid(field.NewPath("excludeIdentifier"), id, msg))
		}
	}

	errs = append(errs, validateBindAddress(field.NewPath("metrics", "bindAddress"), c.Metrics.BindAddress)...)
	errs = append(errs, validateTLSProfile(field.NewPath("metrics"), c.Metrics)...)
	errs = append(errs, validateBindAddress(field.NewPath("health", "bindAddress"), c.Health.BindAddress)...)

	return errs
}

func validateDNS1123Subdomain(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validateWatchedGates(p *field.Path, gates []string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, g := range gates {
		ip := p.Index(i)
		switch {
		case g == "":
			errs = append(errs, field.Required(ip, "must not be empty"))
			continue
		case strings.IndexFunc(g, func(r rune) bool { return unicode.IsSpace(r) || r == ',' }) >= 0:
			errs = append(errs, field.Invalid(ip, g, "must not contain whitespace or commas"))
		}
		if seen.Has(g) {
			errs = append(errs, field.Duplicate(ip, g))
		}
		seen.Insert(g)
	}
	return errs
}

func validatePositiveDuration(p *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than 0")}
	}
	return nil
}

func validateMinDuration(p *field.Path, d metav1.Duration, minimum time.Duration) field.ErrorList {
	if d.Duration < minimum {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must be at least %s", minimum))}
	}
	return nil
}

// validateBindAddress accepts "0" (disabled) or host:port with a numeric port.
func validateBindAddress(p *field.Path, addr string) field.ErrorList {
	if addr == "0" {
		return nil
	}
	if addr == "" {
		return field.ErrorList{field.Required(p, `must be host:port, or "0" to disable`)}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.ErrorList{field.Invalid(p, addr, `must be host:port, or "0" to disable`)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return field.ErrorList{field.Invalid(p, addr, "port must be a number between 0 and 65535")}
	}
	return nil
}

// MaxMaxManifestSize is the largest maxManifestSize accepted: half the
// Deployment's memory limit, as decoding a file costs a multiple of its size.
var MaxMaxManifestSize = resource.MustParse("64Mi")

func validateMaxManifestSize(p *field.Path, q *resource.Quantity) field.ErrorList {
	if q == nil {
		return nil
	}
	if q.Sign() <= 0 || q.Cmp(MaxMaxManifestSize) > 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be more than 0 and at most "+MaxMaxManifestSize.String())}
	}
	return nil
}

// validateLeaseTimings holds client-go's leader election rules, so that a
// bad pair fails at start naming the field, not in the elector.
func validateLeaseTimings(p *field.Path, le LeaderElectionConfig) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePositiveDuration(p.Child("leaseDuration"), le.LeaseDuration)...)
	errs = append(errs, validatePositiveDuration(p.Child("renewDeadline"), le.RenewDeadline)...)
	errs = append(errs, validatePositiveDuration(p.Child("retryPeriod"), le.RetryPeriod)...)
	if len(errs) > 0 {
		return errs
	}
	if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		errs = append(errs, field.Invalid(p.Child("renewDeadline"), le.RenewDeadline.Duration.String(),
			fmt.Sprintf("must be less than leaseDuration (%s)", le.LeaseDuration.Duration)))
	}
	if float64(le.RenewDeadline.Duration) <= 1.2*float64(le.RetryPeriod.Duration) {
		errs = append(errs, field.Invalid(p.Child("retryPeriod"), le.RetryPeriod.Duration.String(),
			fmt.Sprintf("renewDeadline (%s) must be more than 1.2 times it", le.RenewDeadline.Duration)))
	}
	return errs
}

func validateTLSProfile(p *field.Path, m MetricsConfig) field.ErrorList {
	var errs field.ErrorList
	if name := m.TLSProfileFrom; name != "" {
		errs = append(errs, validateDNS1123Subdomain(p.Child("tlsProfileFrom"), name)...)
	}
	switch m.TLSProfileWhenAbsent {
	case "", "Old", "Intermediate", "Modern":
	default:
		errs = append(errs, field.NotSupported(p.Child("tlsProfileWhenAbsent"), m.TLSProfileWhenAbsent, []string{"Old", "Intermediate", "Modern"}))
	}
	if m.TLSProfileFrom != "" && m.Secure != nil && !*m.Secure {
		errs = append(errs, field.Invalid(p.Child("tlsProfileFrom"), m.TLSProfileFrom, "a TLS profile needs secure: true"))
	}
	if m.TLSProfileWhenAbsent != "" && m.TLSProfileFrom == "" {
		errs = append(errs, field.Required(p.Child("tlsProfileFrom"), "tlsProfileWhenAbsent needs the APIServer it stands in for"))
	}
	return errs
}

package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Its own ClusterOperator only: RBAC cannot restrict create by name, but
// reading and writing status can be. A --cluster-operator-name other than
// the default needs these rules edited to match.
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators,verbs=create
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators,verbs=get,resourceNames=featuregate-operator
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators/status,verbs=get;update,resourceNames=featuregate-operator

// Condition reasons.
const (
	ReasonAsExpected          = "AsExpected"
	ReasonManifestsFailed     = "ManifestsFailed"
	ReasonRetrying            = "RetryingFailedManifests"
	ReasonFeatureSetNoUpgrade = "FeatureSetNoUpgrade"
	ReasonUnknownFeatureSet   = "UnknownFeatureSet"
	ReasonUpgrading           = "Upgrading"
)

// StatusReporter writes the operator's status the way OpenShift operators
// do: a ClusterOperator with Available, Progressing, Degraded and
// Upgradeable, the version, and the related objects `oc adm inspect` needs.
type StatusReporter struct {
	Client client.Client
	// Reader reads the ClusterOperator live; it is not worth a cache.
	Reader client.Reader
	// Name of the ClusterOperator, created when missing.
	Name string
	// FeatureGateName is the FeatureGate the operator snapshots, a related object.
	FeatureGateName string
	// Namespace is the one the operator runs in, when known: a related
	// object, so that must-gather collects the operator's own pods and
	// their logs, as OpenShift's monitor tests require of every operator.
	Namespace string
	// Gates, when set, is asked before every write (see guardWrites): no
	// status is written on a snapshot the guard cannot vouch for.
	Gates featuregate.Gates
}

func (s *StatusReporter) writer() client.Client { return guardWrites(s.Client, s.Gates) }

// Report writes the ClusterOperator status for one apply run of snap.
func (s *StatusReporter) Report(ctx context.Context, snap featuregate.Snapshot, run Run) (*configv1.ClusterOperator, error) {
	return s.report(ctx, snap, run.runStatus())
}

// operatorVersion is the version status.versions reports for "operator".
func operatorVersion(st configv1.ClusterOperatorStatus) string {
	for _, v := range st.Versions {
		if v.Name == "operator" {
			return v.Version
		}
	}
	return ""
}

// restore reports the last run again, when there is one; report writes
// only what differs.
func (s *StatusReporter) restore(ctx context.Context, log logr.Logger, last *lastRun) {
	if s == nil || last == nil {
		return
	}
	if _, err := s.report(ctx, last.snap, last.status); err != nil {
		s.notWritten(ctx, log, err, "ClusterOperator status not restored")
	}
}

// notWritten logs a failed status write under msg: an error, unless the
// process is stopping or the guard held the write back. The stop cuts
// writes short on purpose, and whatever else failed then is the next
// process's to report; the guard's re-read is waited out by the next run.
// The line keeps the error either way.
func (s *StatusReporter) notWritten(ctx context.Context, log logr.Logger, err error, msg string) {
	log = log.WithValues("clusterOperator", s.Name)
	if ctx.Err() != nil {
		log.Info(msg+"; stopping", "error", err.Error())
		return
	}
	if errors.Is(err, errNotCurrent) {
		log.Info(msg+"; FeatureGate view not current", "error", err.Error())
		return
	}
	log.Error(err, msg)
}

func (s *StatusReporter) report(ctx context.Context, snap featuregate.Snapshot, run runStatus) (*configv1.ClusterOperator, error) {
	co := &configv1.ClusterOperator{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, co); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			co = &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: s.Name}}
			if err := s.writer().Create(ctx, co); err != nil {
				return err
			}
		}
		want := co.Status.DeepCopy()
		s.fill(want, snap, run)
		if equality.Semantic.DeepEqual(want, &co.Status) {
			return nil
		}
		co.Status = *want
		return s.writer().Status().Update(ctx, co)
	})
	if err != nil {
		return nil, fmt.Errorf("ClusterOperator %s: %w", s.Name, err)
	}
	co.SetGroupVersionKind(configv1.GroupVersion.WithKind("ClusterOperator"))
	return co, nil
}

// fill reports at the snapshot's release version: the one the operator
// was given, or the one the guard resolved for the version marker.
func (s *StatusReporter) fill(st *configv1.ClusterOperatorStatus, snap featuregate.Snapshot, run runStatus) {
	releaseVersion := snap.Version()
	at := ""
	if releaseVersion != "" {
		at = " at " + releaseVersion
	}
	setCondition(st, configv1.OperatorAvailable, configv1.ConditionTrue, ReasonAsExpected,
		fmt.Sprintf("%s is available%s with startup feature set %s; %d manifests applied (%d create-only left as found), %d deleted; capability filter %s",
			s.Name, at, snap.FeatureSetName(), run.applied, run.createOnlyLeft, run.deleted, run.capabilityFilter))

	problems := run.problems
	if len(problems) > 0 {
		setCondition(st, configv1.OperatorDegraded, configv1.ConditionTrue, ReasonManifestsFailed,
			truncate(fmt.Sprintf("%d manifests failed: %s", len(problems), strings.Join(problems, "; ")), 4000))
	} else {
		setCondition(st, configv1.OperatorDegraded, configv1.ConditionFalse, ReasonAsExpected, "")
	}
	// The version moves once a run at it has applied everything: until
	// then the old one is reported, and Progressing says why.
	from := operatorVersion(*st)
	upgrading := releaseVersion != "" && from != "" && from != releaseVersion
	switch {
	case run.failed > 0 && upgrading:
		setCondition(st, configv1.OperatorProgressing, configv1.ConditionTrue, ReasonUpgrading,
			fmt.Sprintf("Moving from version %s to %s: %d of %d included manifests applied; retrying the others", from, releaseVersion, run.applied, run.applied+run.failed))
	case run.failed > 0:
		setCondition(st, configv1.OperatorProgressing, configv1.ConditionTrue, ReasonRetrying,
			fmt.Sprintf("%d of %d included manifests applied; retrying the others", run.applied, run.applied+run.failed))
	default:
		setCondition(st, configv1.OperatorProgressing, configv1.ConditionFalse, ReasonAsExpected, "")
	}
	status, reason, message := upgradeable(snap)
	setCondition(st, configv1.OperatorUpgradeable, status, reason, message)

	if releaseVersion == "" {
		st.Versions = nil
	} else if !upgrading || run.failed == 0 {
		st.Versions = []configv1.OperandVersion{{Name: "operator", Version: releaseVersion}}
	}
	st.RelatedObjects = []configv1.ObjectReference{{Group: configv1.GroupName, Resource: "featuregates", Name: s.FeatureGateName}}
	namespaces := run.namespaces
	if s.Namespace != "" && !slices.Contains(namespaces, s.Namespace) {
		namespaces = append([]string{s.Namespace}, namespaces...)
	}
	for _, ns := range namespaces {
		st.RelatedObjects = append(st.RelatedObjects, configv1.ObjectReference{Resource: "namespaces", Name: ns})
	}
}

// setCondition sets a condition, moving its transition time only when its
// status changes.
func setCondition(st *configv1.ClusterOperatorStatus, t configv1.ClusterStatusConditionType, status configv1.ConditionStatus, reason, message string) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.Now()
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	st.Conditions = append(st.Conditions, configv1.ClusterOperatorStatusCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now(),
	})
}

// upgradeable fails safe: only the feature sets known to allow upgrades
// (Default, and OKD, which openshift/api documents as upgradeable) say
// True. A feature set this operator does not know, such as one an older CRD
// admitted ("Bogus", "default", "TechPreviewNoUpgrade "), blocks upgrades,
// naming the value.
func upgradeable(snap featuregate.Snapshot) (configv1.ConditionStatus, string, string) {
	switch name := snap.FeatureSetName(); {
	case name == "Default" || name == string(configv1.OKD):
		return configv1.ConditionTrue, ReasonAsExpected, ""
	case knownFeatureSet(name):
		return configv1.ConditionFalse, ReasonFeatureSetNoUpgrade, fmt.Sprintf("feature set %s does not allow upgrades", name)
	default:
		return configv1.ConditionFalse, ReasonUnknownFeatureSet, fmt.Sprintf("feature set %q is not one this operator knows; upgrades are blocked until it is", name)
	}
}

func knownFeatureSet(name string) bool { return slices.Contains(manifest.KnownFeatureSets(), name) }

// truncate keeps a message within n bytes, marked "…" where it was cut and
// cut on a rune boundary: the API server refuses invalid UTF-8, and an
// Event note longer than 1 KiB.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// eventNoteLimit is the API server's bound on an Event's note.
const eventNoteLimit = 1024

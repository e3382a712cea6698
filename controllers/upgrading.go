package controllers

import (
	"context"
	"errors"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Before the first run, the Applier says at once what the ClusterOperator
// will say of upgrades, since a first run on a large payload takes a
// while: an unknown feature set blocks them, and a new release version is
// being moved to. The first run's report then says both again, whole.

// warnUnknownFeatureSet records a warning Event when the snapshot's
// feature set is not one this operator knows: upgrades are blocked (see
// upgradeable) until it is.
func (a *Applier) warnUnknownFeatureSet(snap featuregate.Snapshot) {
	name := snap.FeatureSetName()
	if knownFeatureSet(name) {
		return
	}
	a.log().Info("Unknown feature set; upgrades are blocked", "featureSet", name)
	if a.Recorder == nil || a.Status == nil {
		return
	}
	ref := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: a.Status.Name}}
	ref.SetGroupVersionKind(configv1.GroupVersion.WithKind("ClusterOperator"))
	a.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonUnknownFeatureSet, "Snapshot", "%s",
		truncate(fmt.Sprintf("feature set %q is not one this operator knows; Upgradeable=False", name), eventNoteLimit))
}

// announce moves the ClusterOperator towards snap's release version (see
// Starting). A write that fails is left to the first run's report, which
// writes the whole status: it is an error only when neither the stop nor
// the guard's re-read of the FeatureGate explains it.
func (a *Applier) announce(ctx context.Context, snap featuregate.Snapshot) {
	if a.Status == nil {
		return
	}
	err := a.Status.Starting(ctx, snap.Version())
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.Is(err, errNotCurrent):
		a.log().Info("ClusterOperator version move not announced; the first run reports it", "clusterOperator", a.Status.Name, "error", err.Error())
	default:
		a.log().Error(err, "ClusterOperator version move not announced", "clusterOperator", a.Status.Name)
	}
}

// Starting says, before the first run, that this process moves the
// ClusterOperator to releaseVersion, its snapshot's (OpenShift's upgrade
// monitors expect Progressing=True during the move); Available and the
// rest are left as they are until the run reports. Nothing is written when
// the version reported is this one, or for none.
func (s *StatusReporter) Starting(ctx context.Context, releaseVersion string) error {
	if releaseVersion == "" {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		co := &configv1.ClusterOperator{}
		if err := s.Reader.Get(ctx, client.ObjectKey{Name: s.Name}, co); err != nil {
			return client.IgnoreNotFound(err) // the first run creates it
		}
		from := operatorVersion(co.Status)
		if from == "" || from == releaseVersion {
			return nil
		}
		setCondition(&co.Status, configv1.OperatorProgressing, configv1.ConditionTrue, ReasonUpgrading,
			fmt.Sprintf("Moving from version %s to %s: applying the payload", from, releaseVersion))
		return s.writer().Status().Update(ctx, co)
	})
	if err != nil {
		return fmt.Errorf("ClusterOperator %s: %w", s.Name, err)
	}
	return nil
}

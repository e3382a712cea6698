package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// The Applier's writes, one manifest's each: every request is preceded by
// a look at the stop (ctx ends with it too), and sent through the guard
// (writer), which holds it back when it cannot vouch for the snapshot.

// apply server-side applies the object of m, marked as applied (see act
// and resync), and keeps the record the response carries.
func (a *Applier) apply(ctx context.Context, m manifest.Manifest, rs *resync) error {
	if a.halted(ctx) {
		return errStopped
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if m.Object.GetAnnotations()[ForceAnnotation] == "true" {
		opts = append(opts, client.ForceOwnership)
	}
	if err := a.writer().Apply(ctx, client.ApplyConfigurationFromUnstructured(m.Object), opts...); err != nil {
		return a.failed(ctx, m, "apply", err)
	}
	rs.applied(m.Object) // the response
	return nil
}

// createOnly creates the object when it is absent and otherwise leaves it
// as it is, edits included: what release.openshift.io/create-only means to
// the cluster-version-operator.
func (a *Applier) createOnly(ctx context.Context, m manifest.Manifest) (created, leftAlone bool, err error) {
	if a.halted(ctx) {
		return false, false, errStopped
	}
	_, err = a.liveMetadata(ctx, m)
	switch {
	case err == nil:
		return false, true, nil
	case !apierrors.IsNotFound(err):
		return false, false, a.failed(ctx, m, "get", err)
	}
	if a.halted(ctx) {
		return false, false, errStopped
	}
	if err := a.writer().Create(ctx, m.Object.DeepCopy(), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, true, nil // created by someone else meanwhile: theirs
		}
		return false, false, a.failed(ctx, m, "create", err)
	}
	return true, false, nil
}

// liveMetadata reads the metadata of m's object, live: whether it exists
// and whether it is being deleted is all createOnly and delete ask.
func (a *Applier) liveMetadata(ctx context.Context, m manifest.Manifest) (*metav1.PartialObjectMetadata, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(m.Object.GroupVersionKind())
	return live, a.Reader.Get(ctx, client.ObjectKeyFromObject(m.Object), live)
}

// delete deletes the object, foreground, as the cluster-version-operator
// does for release.openshift.io/delete: its dependents go first. An object
// already gone, or being deleted, is what was asked for: it is looked up
// first (metadata only), so that a resync sends no write for it.
func (a *Applier) delete(ctx context.Context, m manifest.Manifest) error {
	if a.halted(ctx) {
		return errStopped
	}
	live, err := a.liveMetadata(ctx, m)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return a.failed(ctx, m, "get", err)
	case live.DeletionTimestamp != nil:
		return nil
	}
	if a.halted(ctx) {
		return errStopped
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(m.Object.GroupVersionKind())
	obj.SetNamespace(m.Object.GetNamespace())
	obj.SetName(m.Object.GetName())
	err = a.writer().Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if err != nil && !apierrors.IsNotFound(err) {
		return a.failed(ctx, m, "delete", err)
	}
	return nil
}

// writer is the Applier's client for writes: each asks the guard first.
func (a *Applier) writer() client.Client { return guardWrites(a.Client, a.Gates) }

// failed wraps a request's error, or tells it apart as the stop's doing or
// as a write the guard held back.
func (a *Applier) failed(ctx context.Context, m manifest.Manifest, verb string, err error) error {
	if a.halted(ctx) {
		return errStopped
	}
	if errors.Is(err, errNotCurrent) {
		return err
	}
	ApplyFailures.Inc()
	return fmt.Errorf("%s: %s: %w", m, verb, err)
}

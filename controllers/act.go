package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// errStopped is an action not taken because a stop was requested: neither a
// success nor a failure.
var errStopped = errors.New("stop requested")

// act applies, creates or deletes the object of m as d decided, unless it
// is already as decided. Every request is preceded by a look at the stop,
// and ctx ends with it.
func (a *Applier) act(ctx context.Context, m manifest.Manifest, d manifest.Decision, rs *resync) (outcome, error) {
	obj, err := a.scoped(m)
	if err != nil {
		return outcome{}, err
	}
	m.Object = obj
	o := outcome{manifest: m}
	switch {
	case d.Delete:
		o.deleted = true
		return o, a.delete(ctx, m)
	case d.CreateOnly:
		o.created, o.leftAlone, err = a.createOnly(ctx, m)
		return o, err
	default:
		o.unchanged, err = a.apply(ctx, m, rs)
		return o, err
	}
}

// scoped is m's object as the server's scope for its kind has it: a
// namespace on a cluster-scoped kind is dropped (it would otherwise name a
// namespace the object has nothing to do with, in relatedObjects too), and a
// namespaced kind without one is an error naming the field.
func (a *Applier) scoped(m manifest.Manifest) (*unstructured.Unstructured, error) {
	mapper := a.Mapper
	if mapper == nil {
		mapper = a.Client.RESTMapper()
	}
	gvk := m.Object.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: kind not served: %w", m, err)
	}
	obj := m.Object.DeepCopy()
	ns := obj.GetNamespace()
	switch namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace; {
	case namespaced && ns == "":
		return nil, fmt.Errorf("%s: metadata.namespace is required: %s is namespaced", m, gvk.Kind)
	case !namespaced && ns != "":
		a.log().Info("Namespace dropped from a cluster-scoped object",
			"manifest", m.String(), "kind", gvk.Kind, "namespace", ns)
		obj.SetNamespace("")
	}
	return obj, nil
}

// apply server-side applies the object of m, marked as applied (see
// resync), unless this process applied it before and finds it as applied:
// then unchanged is true and nothing is sent.
func (a *Applier) apply(ctx context.Context, m manifest.Manifest, rs *resync) (unchanged bool, err error) {
	if err := markApplied(m.Object); err != nil {
		return false, fmt.Errorf("%s: %w", m, err)
	}
	if a.halted(ctx) {
		return false, errStopped
	}
	if rs.unchanged(ctx, m.Object) {
		return true, nil
	}
	if a.halted(ctx) {
		return false, errStopped
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if m.Object.GetAnnotations()[ForceAnnotation] == "true" {
		opts = append(opts, client.ForceOwnership)
	}
	if err := a.writer().Apply(ctx, client.ApplyConfigurationFromUnstructured(m.Object), opts...); err != nil {
		return false, a.failed(ctx, m, "apply", err)
	}
	rs.applied(m.Object) // the response
	return false, nil
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

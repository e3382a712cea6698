package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// act applies, creates or deletes the object of m as d decided, unless it
// is already as decided: an object to apply that this process applied
// before and finds as applied (see resync) is not sent again. The writes
// themselves are write.go's.
func (a *Applier) act(ctx context.Context, m manifest.Manifest, d manifest.Decision, rs *resync) (outcome, error) {
	obj, err := a.scoped(m)
	if err != nil {
		return outcome{}, err
	}
	m.Object = obj
	o := outcome{manifest: m}
	if !d.Delete && !d.CreateOnly {
		if err := markApplied(m.Object); err != nil {
			return o, fmt.Errorf("%s: %w", m, err)
		}
		if a.halted(ctx) {
			return o, errStopped
		}
		if rs.unchanged(ctx, m.Object) {
			o.unchanged = true
			return o, nil
		}
	}
	switch {
	case d.Delete:
		o.deleted = true
		return o, a.delete(ctx, m)
	case d.CreateOnly:
		o.created, o.leftAlone, err = a.createOnly(ctx, m)
		return o, err
	default:
		return o, a.apply(ctx, m, rs)
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

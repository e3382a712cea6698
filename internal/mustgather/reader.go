package mustgather

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/featuregate-operator/operator/internal/objectfile"
)

// Reader is a Gather read as a cluster: Get decodes an object of a kind
// scheme knows; one that is not there is NotFound, as from a cluster. List
// is not offered: a must-gather holds only some objects of most resources.
type Reader struct {
	*Gather
	Scheme *runtime.Scheme
}

var _ client.Reader = Reader{}

func (r Reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme)
	if err != nil {
		return err
	}
	resource := r.resource(gvk.GroupKind())
	data, file, _, tried, err := r.lookup(gvk.Group, resource, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	if file == "" {
		for i := range tried {
			tried[i] = r.path(tried[i])
		}
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Details: &metav1.StatusDetails{Group: gvk.Group, Kind: resource, Name: key.Name},
			Message: fmt.Sprintf("%s %s is in neither %s", gvk.Kind, key.Name, strings.Join(tried, " nor ")),
		}}
	}
	if err := objectfile.Decode(data, gvk, obj, true); err != nil {
		return fmt.Errorf("%s: %w", r.path(file), err)
	}
	return nil
}

func (r Reader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("a must-gather is not listed")
}

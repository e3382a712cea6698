package featuregate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Part is a config object the snapshot holds beside the FeatureGate, given
// in Options.Parts: one the component reads at start and must restart on
// when what it consumes of it changes (the Infrastructure's topology, the
// cluster Proxy). NewPart makes one. The guard gives it the FeatureGate's
// discipline: not ready until it is read, a change of what is consumed of
// it stops the manager (or Run), and Current vouches for it, on the same
// freshness bound.
type Part interface {
	newPart(cfg *rest.Config, opts Options, stop *stopper, events eventWriter, m metrics) (part, error)
}

// PartOptions configure a Part; the zero value reads a cluster-scoped
// object of a kind client-go's or config.openshift.io/v1's scheme knows.
type PartOptions[T comparable] struct {
	// Namespace is the object's, for a namespaced kind.
	Namespace string
	// Absent, when set, is the value held when the cluster has no such
	// object, or serves no such kind (MicroShift, plain Kubernetes). Nil:
	// the guard waits for one, not ready, and readiness says why. Never a
	// silent default: an object that appears later with another value
	// stops the process.
	Absent *T
	// Scheme knows the object's type; nil: client-go's and
	// config.openshift.io/v1's.
	Scheme *runtime.Scheme
	// Resource is the kind's plural, when it is not the lower-case kind
	// plus "s" (or "es", "ies") as Kubernetes spells most.
	Resource string
}

// ObjectPart is a Part whose consumed value is a T: the projection of one
// object, compared with ==. Its Value reads it from a snapshot.
type ObjectPart[T comparable] struct {
	gvk       schema.GroupVersionKind
	resource  string
	namespace string
	name      string
	project   func(*unstructured.Unstructured) (T, error)
	absent    *T
	key       *partKey
}

// NewPart is a Part for the object of type O named name, whose consumed
// value is project's: only a change of that value restarts, whatever else
// of the object changes, and the stop's reason (Guard.StopReason) is
// "<Kind> <name> changed from <old> to <new>", the values as %v prints
// them. The guard reads the object itself, live (list and watch on its
// kind are the operator's to grant), and project is given a copy it may
// keep. Its type parameters are inferred from project. It fails when name
// or project is missing, or when the scheme (PartOptions.Scheme) does not
// know O.
func NewPart[T comparable, O any, PO interface {
	*O
	client.Object
}](name string, project func(PO) T, opts PartOptions[T]) (*ObjectPart[T], error) {
	if name == "" || project == nil {
		return nil, errors.New("featuregate.NewPart: a name and a projection are required")
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, err
		}
		if err := configv1.Install(scheme); err != nil {
			return nil, err
		}
	}
	gvk, err := apiutil.GVKForObject(PO(new(O)), scheme)
	if err != nil {
		return nil, fmt.Errorf("featuregate.NewPart: %w", err)
	}
	resource := opts.Resource
	if resource == "" {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		resource = plural.Resource
	}
	return &ObjectPart[T]{
		gvk: gvk, resource: resource, namespace: opts.Namespace, name: name, absent: opts.Absent,
		key: &partKey{label: gvk.Kind + " " + name},
		project: func(u *unstructured.Unstructured) (T, error) {
			var zero T
			obj := PO(new(O))
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				return zero, fmt.Errorf("decode %s %s: %w", gvk.Kind, name, err)
			}
			return project(obj), nil
		},
	}, nil
}

// Value is the part's value in s, and false when s holds none (a snapshot
// of a guard not given this part, or not taken yet).
func (p *ObjectPart[T]) Value(s Snapshot) (T, bool) {
	v, ok := s.valueOf(p.key)
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

func (p *ObjectPart[T]) newPart(cfg *rest.Config, opts Options, stop *stopper, events eventWriter, m metrics) (part, error) {
	dial := func() (*rest.RESTClient, *http.Transport, error) {
		hc, conns, err := ownConnection(cfg, opts.FreshnessBound)
		if err != nil {
			return nil, nil, err
		}
		c := dynamic.ConfigFor(cfg)
		gv := p.gvk.GroupVersion()
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		rc, err := rest.RESTClientForConfigAndClient(c, hc)
		return rc, conns, err
	}
	c, err := newOwnClient(dial)
	if err != nil {
		return nil, fmt.Errorf("%s reads: %w", p.key.label, err)
	}
	return &objectPart[T]{ObjectPart: p, ownClient: c, establish: 2 * time.Second,
		stopper: stop, events: events, metrics: m, log: opts.Logger}, nil
}

// objectPart is an ObjectPart at work in one guard: it lists the object by
// name, consistently, to read it, and watches from that list to follow it,
// on connections of its own, as the FeatureGate's reads are (apiSource).
type objectPart[T comparable] struct {
	*ObjectPart[T]
	*ownClient
	establish time.Duration
	stopper   *stopper
	events    eventWriter
	metrics   metrics
	log       logr.Logger

	// unreadable is the last reason a live object could not be held.
	unreadable lastReason

	// at is the resourceVersion of the last list, where follow watches
	// from; notServed is set when the last read found no such API.
	at        atomic.Pointer[string]
	notServed atomic.Bool
}

func (o *objectPart[T]) key() *partKey  { return o.ObjectPart.key }
func (o *objectPart[T]) what() string   { return o.ObjectPart.key.label }
func (o *objectPart[T]) object() string { return o.ObjectPart.key.label }

// errUnholdable is a live object the part cannot hold a value of (absent
// without a fallback, undecodable): an answer, not a value.
type errUnholdable struct{ err error }

func (e *errUnholdable) Error() string { return e.err.Error() }
func (e *errUnholdable) Unwrap() error { return e.err }

func (o *objectPart[T]) request(verb string) *rest.Request {
	r := o.client().Verb(verb).Resource(o.resource).MaxRetries(0)
	if o.namespace != "" {
		r = r.Namespace(o.namespace)
	}
	return r
}

func (o *objectPart[T]) selector() string {
	return fields.OneTermEqualSelector("metadata.name", o.name).String()
}

// read is a consistent list of the object by name, projected.
func (o *objectPart[T]) read(ctx context.Context) (T, error) {
	var zero T
	raw, err := o.request("GET").VersionedParams(&metav1.ListOptions{FieldSelector: o.selector()}, metav1.ParameterCodec).Do(ctx).Raw()
	if err != nil {
		err = describeReadErrorOf(o.gvk.Kind, o.name, err)
		var notServed *notServedError
		if errors.As(err, &notServed) {
			o.notServed.Store(true)
			return o.whenAbsent(err)
		}
		return zero, err
	}
	o.notServed.Store(false)
	list := &unstructured.UnstructuredList{}
	if err := list.UnmarshalJSON(raw); err != nil {
		return zero, &errUnholdable{fmt.Errorf("decode %s %s: %w", o.gvk.Kind, o.name, err)}
	}
	rv := list.GetResourceVersion()
	o.at.Store(&rv)
	if len(list.Items) == 0 {
		return o.whenAbsent(fmt.Errorf("%s %s %w", o.gvk.Kind, o.name, errNotFound))
	}
	v, err := o.project(&list.Items[0])
	if err != nil {
		return zero, &errUnholdable{err}
	}
	return v, nil
}

// whenAbsent is the fallback value, or why there is none.
func (o *objectPart[T]) whenAbsent(why error) (T, error) {
	if o.absent == nil {
		var zero T
		return zero, &errUnholdable{fmt.Errorf("%w, and its featuregate.PartOptions.Absent names no fallback value: waiting for it", why)}
	}
	return *o.absent, nil
}

func (o *objectPart[T]) take(ctx context.Context) (any, error) {
	v, err := o.read(ctx)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// check reads the object and compares its value with held.
func (o *objectPart[T]) check(ctx context.Context, held any, detectedBy string) (bool, error) {
	live, err := o.read(ctx)
	var unholdable *errUnholdable
	switch {
	case errors.As(err, &unholdable):
		o.keep(err, held, detectedBy)
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, fmt.Errorf("%w to a consistent read of %s: %w", errNoAnswer, o.key().label, ctx.Err())
	case err != nil:
		return false, err
	}
	return o.compare(ctx, held.(T), live, detectedBy), nil
}

// keep logs, once per reason, a live object the part cannot hold a value
// of: the snapshot is kept (a new process could not read one either).
func (o *objectPart[T]) keep(err error, held any, detectedBy string) {
	if o.unreadable.changed(err.Error()) {
		o.log.Info("Snapshot part cannot be read; keeping its startup value", "part", o.key().label,
			"detectedBy", detectedBy, "reason", err.Error(), "startupValue", fmt.Sprint(held))
	}
}

// compare asks for the stop when live differs from held, and reports it.
func (o *objectPart[T]) compare(ctx context.Context, held, live T, detectedBy string) bool {
	o.unreadable.changed("")
	if live == held {
		return false
	}
	reason := fmt.Sprintf("%s changed from %v to %v", o.key().label, held, live)
	if !o.stopper.Stop(reason, nil) {
		return true // reported by whoever saw it first
	}
	o.log.Info("Snapshot part changed; requesting shutdown", "part", o.key().label, "detectedBy", detectedBy,
		"startupValue", fmt.Sprint(held), "liveValue", fmt.Sprint(live))
	ref := &corev1.ObjectReference{APIVersion: o.gvk.GroupVersion().String(), Kind: o.gvk.Kind, Namespace: o.namespace, Name: o.name}
	o.events.record(ctx, ref, corev1.EventTypeWarning, reasonSnapshotPartChanged, "Compare", reason+"; requesting shutdown")
	o.metrics.shutdownRequests.Inc()
	return true
}

// follow watches the object from the last list (the monitor's check, just
// before), comparing every state it sees. A kind not served has nothing
// to watch: the prover's reads, while asked, would see it arrive.
func (o *objectPart[T]) follow(ctx context.Context, held any, following func()) (bool, error) {
	at := o.at.Load()
	if o.notServed.Load() || at == nil {
		following()
		<-ctx.Done()
		return false, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := openWatch(ctx, cancel, o.request("GET"), o.selector(), *at, o.establish, o.key().label)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	following()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, w.ended(ctx)
			}
			var live T
			var err error
			switch ev.Type {
			case watch.Added, watch.Modified:
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				live, err = o.project(u)
			case watch.Deleted:
				live, err = o.whenAbsent(fmt.Errorf("%s %s %w", o.gvk.Kind, o.name, errNotFound))
			case watch.Error:
				return false, fmt.Errorf("watch %s: %w", o.key().label, apierrors.FromObject(ev.Object))
			default:
				continue
			}
			if err != nil {
				o.keep(err, held, "verify")
				continue
			}
			if o.compare(ctx, held.(T), live, "verify") {
				return true, nil
			}
		}
	}
}

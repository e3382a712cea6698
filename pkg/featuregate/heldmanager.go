package featuregate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the guarded manager hands an operator's own code, as opposed to
// what it starts itself, is held until the startup snapshot is taken: the
// idioms real operators use around a stock manager (a goroutine that waits
// for the cache and then writes, a write through the manager's client, a
// wait for Elected) must not act on a feature set nobody read, with the
// API down at start or the FeatureGate absent.

// errBeforeStart is a write through the manager's client before its Start:
// holding it would block a caller that is about to call Start for ever.
// errStoppedUnread is a write held for a snapshot the manager stopped
// before taking.
var errStoppedUnread = errors.New("featuregate: write refused, the manager stopped before the FeatureGate was read; no feature set was read")

var errBeforeStart = errors.New("featuregate: write through the manager's client before the manager started; no feature set is read until it starts")

// heldCache is the manager's cache as GetCache returns it to the operator.
// The manager's own start-up waits on the deferred cache itself, whose
// WaitForCacheSync answers at once before it is built (the manager starts
// everything else after its caches, the guard's startup read included).
type heldCache struct {
	*deferredCache
}

// WaitForCacheSync waits for the snapshot and for the cache built from it,
// as a stock manager's waits for Start; false when ctx ends first.
func (h heldCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-h.ready:
		return h.cache.WaitForCacheSync(ctx)
	}
}

// heldClient is the manager's client as GetClient returns it: reads as
// they are (they wait for the cache, or read the API, and act on nothing),
// writes held until the snapshot is taken and refused once a stop is
// requested.
type heldClient struct {
	client.Client
	guard *Guard
	// started and stopped close when the manager's Start is called and
	// when it returns.
	started, stopped <-chan struct{}
}

// hold waits until a write may be sent.
func (h heldClient) hold(ctx context.Context) error {
	g := h.guard
	select {
	case <-g.startup.Taken():
	default:
		select {
		case <-h.started:
		default:
			return errBeforeStart
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("featuregate: write held until the startup snapshot is taken: %w", ctx.Err())
		case <-h.stopped:
			// Nothing will read it now: a cleanup write after Start
			// returned must not wait for ever.
			select {
			case <-g.startup.Taken():
			default:
				return errStoppedUnread
			}
		case <-g.startup.Taken():
		}
	}
	if reason, stopping := g.stopper.Reason(); stopping {
		return fmt.Errorf("featuregate: write refused, the manager is stopping: %s", reason)
	}
	return nil
}

func (h heldClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.Create(ctx, obj, opts...)
}

func (h heldClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.Update(ctx, obj, opts...)
}

func (h heldClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.Patch(ctx, obj, patch, opts...)
}

func (h heldClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.Apply(ctx, obj, opts...)
}

func (h heldClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.Delete(ctx, obj, opts...)
}

func (h heldClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := h.hold(ctx); err != nil {
		return err
	}
	return h.Client.DeleteAllOf(ctx, obj, opts...)
}

func (h heldClient) Status() client.SubResourceWriter { return h.SubResource("status") }

func (h heldClient) SubResource(name string) client.SubResourceClient {
	return heldSubResource{SubResourceClient: h.Client.SubResource(name), held: h}
}

// heldSubResource holds a subresource's writes as heldClient holds writes.
type heldSubResource struct {
	client.SubResourceClient
	held heldClient
}

func (h heldSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := h.held.hold(ctx); err != nil {
		return err
	}
	return h.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (h heldSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := h.held.hold(ctx); err != nil {
		return err
	}
	return h.SubResourceClient.Update(ctx, obj, opts...)
}

func (h heldSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := h.held.hold(ctx); err != nil {
		return err
	}
	return h.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (h heldSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := h.held.hold(ctx); err != nil {
		return err
	}
	return h.SubResourceClient.Apply(ctx, obj, opts...)
}

// elected closes once the manager was elected (or runs without leader
// election) and the cache built from the snapshot serves, or the manager
// has stopped.
type elected struct {
	once sync.Once
	ch   chan struct{}
}

func (e *elected) get(inner <-chan struct{}, built <-chan struct{}, stopped <-chan struct{}) <-chan struct{} {
	e.once.Do(func() {
		e.ch = make(chan struct{})
		go func() {
			for _, c := range []<-chan struct{}{inner, built} {
				select {
				case <-c:
				case <-stopped:
					return
				}
			}
			close(e.ch)
		}()
	})
	return e.ch
}

var _ cache.Cache = heldCache{}

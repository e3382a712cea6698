package controllers

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// errStopped is an action not taken because a stop was requested: neither a
// success nor a failure.
var errStopped = errors.New("stop requested")

// errNotCurrent is a write not sent because the guard could not vouch for
// the snapshot at that moment: neither a success nor a failure, a reason to
// try again later.
var errNotCurrent = errors.New("FeatureGate view not current; write not sent")

// guardWrites is c whose every write first asks gates.Current, at the
// moment it would be sent: so no write this operator makes starts on a
// snapshot older than the guard's freshness bound, whichever code path
// makes it. Reads pass through.
func guardWrites(c client.Client, gates featuregate.Gates) client.Client {
	if gates == nil {
		return c
	}
	return guardedClient{Client: c, gates: gates}
}

type guardedClient struct {
	client.Client
	gates featuregate.Gates
}

func (g guardedClient) check() error {
	if !g.gates.Current() {
		return errNotCurrent
	}
	return nil
}

func (g guardedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Create(ctx, obj, opts...)
}

func (g guardedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Update(ctx, obj, opts...)
}

func (g guardedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Patch(ctx, obj, patch, opts...)
}

func (g guardedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Apply(ctx, obj, opts...)
}

func (g guardedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.Delete(ctx, obj, opts...)
}

func (g guardedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Client.DeleteAllOf(ctx, obj, opts...)
}

func (g guardedClient) Status() client.SubResourceWriter { return g.SubResource("status") }

func (g guardedClient) SubResource(subResource string) client.SubResourceClient {
	return guardedSubResource{SubResourceClient: g.Client.SubResource(subResource), check: g.check}
}

type guardedSubResource struct {
	client.SubResourceClient
	check func() error
}

func (g guardedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (g guardedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.SubResourceClient.Update(ctx, obj, opts...)
}

func (g guardedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (g guardedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.SubResourceClient.Apply(ctx, obj, opts...)
}

package controllers

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// The watch of the operator's own ClusterOperator, set up before the first
// run: a deletion or an overwrite pokes the Applier, which restores the
// ClusterOperator between runs (see between). The manager's cache is
// restricted to its name, which RBAC grants list and watch by.
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators,verbs=list;watch,resourceNames=featuregate-operator

// watchStatus restores the ClusterOperator from the last run as soon as it
// is deleted or its status overwritten, rather than at the next resync.
func (a *Applier) watchStatus(ctx context.Context) error {
	if a.Cache == nil || a.Status == nil {
		return nil
	}
	informer, err := a.Cache.GetInformer(ctx, &configv1.ClusterOperator{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watch ClusterOperator %s: %w", a.Status.Name, err)
	}
	ours := func(obj any) bool {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		co, ok := obj.(*configv1.ClusterOperator)
		return ok && co.Name == a.Status.Name
	}
	_, err = informer.AddEventHandler(toolscache.FilteringResourceEventHandler{
		FilterFunc: ours,
		Handler: toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(any, any) { a.Poke() },
			DeleteFunc: func(any) { a.Poke() },
		},
	})
	if err != nil {
		return fmt.Errorf("watch ClusterOperator %s: %w", a.Status.Name, err)
	}
	// The first run creates the ClusterOperator: a creation while the
	// informer is still syncing was seen to be missed (client-go 0.37,
	// watch-list), and then a deletion would be too. A watch that cannot
	// sync (forbidden, say) leaves restoring to the resync.
	syncCtx, cancel := context.WithTimeout(ctx, statusSyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) && ctx.Err() == nil {
		a.log().Info("ClusterOperator watch not synced; it is restored at resync only",
			"clusterOperator", a.Status.Name, "timeout", statusSyncTimeout.String())
	}
	return nil
}

// statusSyncTimeout bounds the wait for the ClusterOperator watch before the
// first run.
const statusSyncTimeout = 30 * time.Second

// Poke asks for the ClusterOperator to be reported again from the last run.
func (a *Applier) Poke() {
	select {
	case a.pokes() <- struct{}{}:
	default: // one pending is enough
	}
}

func (a *Applier) pokes() chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.poke == nil {
		a.poke = make(chan struct{}, 1)
	}
	return a.poke
}

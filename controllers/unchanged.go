package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// A resync sends no write for an object that is still as the operator last
// applied it. What it knows cheaply decides that:
//
//   - AppliedHashAnnotation, on the object, is the hash of the content
//     applied: it tells a changed payload file from an unchanged one.
//   - The operator's own managed-fields entry (field manager FieldManager,
//     operation Apply), remembered in memory as the apply's response had it,
//     together with the object's UID: server-side apply moves a field that
//     another writer changes out of that entry and drops a field that
//     another writer removes from it, so an unchanged entry on the same
//     object means that every field applied is still as applied. A write
//     that touches only fields the operator does not own (a controller's
//     status, a label someone else added) leaves it as it is, and applying
//     again would change nothing either.
//   - The live side is read metadata-only, one LIST per kind and namespace
//     selected by ManagedLabel, rather than one request per object.
//
// A process remembers nothing from its predecessor, so its first run
// applies everything.
const (
	// AppliedHashAnnotation is the SHA-256, in hex, of the object as the
	// operator applied it, this annotation aside.
	AppliedHashAnnotation = "featuregate-operator.io/applied-hash"
	// ManagedLabel marks the objects the operator applies.
	ManagedLabel = "featuregate-operator.io/managed"
)

// record is what an apply left on an object: a digest of its UID and of
// the operator's managed-fields entry.
type record [sha256.Size]byte

// recordOf is obj's record, false when obj carries no entry of the
// operator's apply (a kind that does not track managed fields, say).
func recordOf(obj metav1.Object) (record, bool) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		// The entry arrives as JSON from an apply and as protobuf from a
		// list: the field set is compared with its keys sorted.
		var fields any
		if e.FieldsV1 == nil || json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			return record{}, false
		}
		canonical, err := json.Marshal(fields)
		if err != nil {
			return record{}, false
		}
		var at string
		if e.Time != nil {
			at = e.Time.UTC().Format(time.RFC3339)
		}
		h := sha256.New()
		for _, s := range [][]byte{[]byte(obj.GetUID()), []byte(e.APIVersion), []byte(at), canonical} {
			h.Write(s)
			h.Write([]byte{0})
		}
		var r record
		h.Sum(r[:0])
		return r, true
	}
	return record{}, false
}

// markApplied labels obj with ManagedLabel and records in
// AppliedHashAnnotation the hash of its content, label included.
func markApplied(obj *unstructured.Unstructured) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedLabel] = "true"
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	delete(annotations, AppliedHashAnnotation)
	obj.SetAnnotations(annotations)
	// encoding/json sorts map keys: the same content, the same bytes.
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("hash: %w", err)
	}
	sum := sha256.Sum256(data)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedHashAnnotation] = hex.EncodeToString(sum[:])
	obj.SetAnnotations(annotations)
	return nil
}

// resync is one run's view of what the operator applied: the records of the
// previous run, the live objects' metadata as listed on first need, and the
// records this run leaves for the next.
type resync struct {
	reader client.Reader
	log    logr.Logger
	last   map[manifest.ObjectID]record

	mu    sync.Mutex
	next  map[manifest.ObjectID]record
	lists map[listKey]*listing
	// versions are a resourceVersion each kind was listed at: its later
	// lists may be served by the API server's watch cache (not older than
	// that) instead of asking etcd for its current revision again.
	versions map[schema.GroupKind]string
}

type listKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// listing is the live metadata of one kind in one namespace: by name, the
// objects that carry an entry of the operator's apply; nil when it could
// not be listed.
type listing struct {
	once  sync.Once
	items map[string]live
}

type live struct {
	hash   string
	record record
}

func newResync(reader client.Reader, log logr.Logger, last map[manifest.ObjectID]record) *resync {
	return &resync{reader: reader, log: log, last: last,
		next: map[manifest.ObjectID]record{}, lists: map[listKey]*listing{}, versions: map[schema.GroupKind]string{}}
}

// unchanged is true when obj, marked, is live as this process last applied
// it: its record is the one remembered and its hash that of obj. The
// record is then kept for the next run.
func (r *resync) unchanged(ctx context.Context, obj *unstructured.Unstructured) bool {
	if manifest.Sensitive(obj.GroupVersionKind().GroupKind()) {
		return false // not listed: see manifest.Sensitive
	}
	key := manifest.IDOf(obj)
	want, ok := r.last[key]
	if !ok {
		return false // never applied by this process: nothing to compare with
	}
	got, ok := r.listed(ctx, obj.GroupVersionKind(), obj.GetNamespace())[obj.GetName()]
	if !ok || got.record != want || got.hash != obj.GetAnnotations()[AppliedHashAnnotation] {
		return false
	}
	r.keep(key, want)
	return true
}

// applied keeps the record the apply response obj carries.
func (r *resync) applied(obj *unstructured.Unstructured) {
	if rec, ok := recordOf(obj); ok {
		r.keep(manifest.IDOf(obj), rec)
	}
}

func (r *resync) keep(key manifest.ObjectID, rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next[key] = rec
}

// listed lists, once per run, the metadata of the objects of kind gvk in
// namespace ns (cluster-wide for a cluster-scoped kind) that carry
// ManagedLabel. A list that fails is logged and leaves its objects to be
// applied.
func (r *resync) listed(ctx context.Context, gvk schema.GroupVersionKind, ns string) map[string]live {
	k := listKey{gvk, ns}
	r.mu.Lock()
	l, ok := r.lists[k]
	if !ok {
		l = &listing{}
		r.lists[k] = l
	}
	r.mu.Unlock()
	l.once.Do(func() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{ManagedLabel: "true"}}
		r.mu.Lock()
		rv := r.versions[gvk.GroupKind()]
		r.mu.Unlock()
		if rv != "" {
			opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{
				ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}})
		}
		if err := r.reader.List(ctx, list, opts...); err != nil {
			if ctx.Err() == nil {
				r.log.Error(err, "Applied objects not listed; applying them", "kind", gvk.Kind, "namespace", ns)
			}
			return
		}
		r.mu.Lock()
		if r.versions[gvk.GroupKind()] == "" {
			r.versions[gvk.GroupKind()] = list.ResourceVersion
		}
		r.mu.Unlock()
		l.items = make(map[string]live, len(list.Items))
		for i := range list.Items {
			item := &list.Items[i]
			if rec, ok := recordOf(item); ok {
				l.items[item.Name] = live{hash: item.Annotations[AppliedHashAnnotation], record: rec}
			}
		}
	})
	return l.items
}

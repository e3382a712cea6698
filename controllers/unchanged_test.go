package controllers

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/manifest"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// requests counts what a client sends, at its transport: what the API
// server receives, whichever client-side path a request takes.
type requests struct {
	mu   sync.Mutex
	sent []string // "METHOD path?query"
}

func (r *requests) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.sent = append(r.sent, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
		r.mu.Unlock()
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// countingClient is a client for cfg whose requests are counted.
func countingClient(t *testing.T, cfg *rest.Config) (client.Client, *requests) {
	t.Helper()
	r := &requests{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(r.RoundTrip)
	c, err := controlplane.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// take returns the requests sent since the last take: the writes (any
// method but GET), the lists (GETs of a collection, named by the resource)
// and the other GETs.
func (r *requests) take() (writes, lists, gets []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sent {
		switch {
		case !strings.HasPrefix(s, "GET "):
			writes = append(writes, s)
		case strings.Contains(s, "labelSelector="):
			lists = append(lists, s)
		default:
			gets = append(gets, s)
		}
	}
	r.sent = nil
	return writes, lists, gets
}

// patchOf is the request that applies a ConfigMap of default, without
// its query.
func patchOf(name string) string {
	return "PATCH /api/v1/namespaces/default/configmaps/" + name
}

// withoutQuery is reqs without their queries.
func withoutQuery(reqs []string) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i], _, _ = strings.Cut(r, "?")
	}
	return out
}

// paths are the paths of reqs, without method or query.
func paths(reqs []string) []string {
	out := withoutQuery(reqs)
	for i, r := range out {
		_, out[i], _ = strings.Cut(r, " ")
	}
	return out
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// A resync that finds everything as it last applied it sends no write: not
// for what it applies (the CRD's status, written by the API server since,
// is not the operator's), not for a create-only object that exists, not for
// a deleted object that is gone or going. What it reads is one
// metadata-only list per kind and namespace, no request per applied
// object. A new process (a restart) remembers nothing: it applies
// everything once, and then writes nothing again.
func TestResyncWritesNothingWhenUnchanged(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	ctx := e.ctx
	g.Expect(e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "doomed"}})).To(Succeed())
	dir := harness.WriteFiles(t, map[string]string{
		"0000_05_namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: noop\n",
		"0000_05_crd.yaml":       widgetCRD,
		"0000_10_a.yaml":         configMap("a"),
		"0000_10_b.yaml":         configMap("b"),
		"0000_10_c.yaml":         strings.Replace(configMap("c"), "namespace: default", "namespace: noop", 1),
		"0000_10_sa.yaml":        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: noop\n",
		"0000_10_role.yaml":      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: noop\nrules: []\n",
		"0000_10_seeded.yaml":    configMap("seeded", "release.openshift.io/create-only", "true"),
		"0000_10_doomed.yaml":    configMap("doomed", "release.openshift.io/delete", "true"),
		"0000_10_absent.yaml":    configMap("never-existed", "release.openshift.io/delete", "true"),
	})
	const applies = 7 // the rest are create-only or deletions
	c, reqs := countingClient(t, e.cp.Config)
	a := newApplier(c, e.guard, dir)
	snap := snapshotOf(t, e.guard)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Applied).To(HaveLen(applies + 1))
	g.Expect(run.Unchanged).To(BeZero())
	writes, lists, _ := reqs.take()
	g.Expect(writes).To(HaveLen(applies+2), "applies, a create and a delete")
	g.Expect(lists).To(BeEmpty(), "a first run has nothing to compare with")
	// The API server writes the CRD's status after the apply.
	g.Eventually(func() []any {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		g.Expect(e.c.Get(ctx, client.ObjectKey{Name: "widgets.example.com"}, crd)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		return conditions
	}).WithTimeout(30 * time.Second).Should(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))))

	for range 2 {
		run = a.Apply(ctx, snap)
		g.Expect(run.Failed).To(BeEmpty())
		g.Expect(run.Applied).To(HaveLen(applies + 1))
		g.Expect(run.Unchanged).To(Equal(applies))
		g.Expect(run.CreateOnlyLeft).To(Equal(1))
		g.Expect(run.Deleted).To(HaveLen(2))
		writes, lists, gets := reqs.take()
		g.Expect(writes).To(BeEmpty())
		g.Expect(paths(lists)).To(ConsistOf(
			"/api/v1/namespaces", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
			"/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/noop/configmaps",
			"/api/v1/namespaces/noop/serviceaccounts", "/apis/rbac.authorization.k8s.io/v1/clusterroles"))
		g.Expect(paths(gets)).To(ConsistOf(
			"/apis/config.openshift.io/v1/clusterversions/version",
			"/api/v1/namespaces/default/configmaps/seeded",
			"/api/v1/namespaces/default/configmaps/doomed",
			"/api/v1/namespaces/default/configmaps/never-existed"), "no read per applied object")
	}

	restarted := newApplier(c, e.guard, dir)
	run = restarted.Apply(ctx, snap)
	g.Expect(run.Unchanged).To(BeZero())
	writes, _, _ = reqs.take()
	g.Expect(writes).To(HaveLen(applies), "a new process applies everything once")
	run = restarted.Apply(ctx, snap)
	g.Expect(run.Unchanged).To(Equal(applies))
	writes, _, _ = reqs.take()
	g.Expect(writes).To(BeEmpty())
}

// Drift is repaired by the next resync, and only drift is written: an
// object edited by someone else (a field the payload sets), one deleted,
// and one whose applied-hash annotation was stripped are applied again;
// one to which someone else only added a label of their own is not (an
// apply would not change it), and keeps that label. An edited field is the
// editor's until an apply forces it back, which only a manifest annotated
// force-ownership does: without it the apply is sent and its conflict
// reported, as before.
func TestResyncRepairsDrift(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	ctx := e.ctx
	names := []string{"edited", "deleted", "stripped", "labelled", "untouched"}
	files := map[string]string{"0000_10_contested.yaml": configMap("contested")}
	for _, name := range names {
		files["0000_10_"+name+".yaml"] = configMap(name)
	}
	files["0000_10_edited.yaml"] = configMap("edited", ForceAnnotation, "true")
	c, reqs := countingClient(t, e.cp.Config)
	a := newApplier(c, e.guard, harness.WriteFiles(t, files))
	snap := snapshotOf(t, e.guard)
	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	hashes := map[string]string{}
	for _, name := range names {
		cm := &corev1.ConfigMap{}
		g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm)).To(Succeed())
		g.Expect(cm.Annotations).To(HaveKeyWithValue(AppliedHashAnnotation, Not(BeEmpty())))
		g.Expect(cm.Labels).To(HaveKeyWithValue(ManagedLabel, "true"))
		hashes[name] = cm.Annotations[AppliedHashAnnotation]
	}

	// Someone else's writes, as kubectl edit, delete and patch send them.
	cm := &corev1.ConfigMap{}
	for _, name := range []string{"edited", "contested"} {
		g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm)).To(Succeed())
		cm.Data["from"] = "someone else"
		g.Expect(e.c.Update(ctx, cm)).To(Succeed())
	}
	g.Expect(e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "deleted"}})).To(Succeed())
	strip := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+AppliedHashAnnotation+`":null}}}`))
	g.Expect(e.c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stripped"}}, strip)).To(Succeed())
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"theirs"}}}`))
	g.Expect(e.c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "labelled"}}, label)).To(Succeed())
	reqs.take()

	run = a.Apply(ctx, snap)
	g.Expect(run.Failed).To(ConsistOf(MatchError(And(ContainSubstring("0000_10_contested.yaml"), ContainSubstring("conflict")))))
	g.Expect(run.Unchanged).To(Equal(2))
	writes, _, _ := reqs.take()
	g.Expect(withoutQuery(writes)).To(ConsistOf(patchOf("edited"), patchOf("deleted"), patchOf("stripped"), patchOf("contested")))
	for _, name := range names {
		cm := &corev1.ConfigMap{}
		g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm)).To(Succeed(), name)
		g.Expect(cm.Data).To(Equal(map[string]string{"from": "manifest"}), name)
		g.Expect(cm.Annotations).To(HaveKeyWithValue(AppliedHashAnnotation, hashes[name]), name)
	}
	g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "labelled"}, cm)).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue("team", "theirs"))

	g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "contested"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("from", "someone else"))

	run = a.Apply(ctx, snap)
	g.Expect(run.Unchanged).To(Equal(len(names)), "the repairs are remembered")
	writes, _, _ = reqs.take()
	g.Expect(withoutQuery(writes)).To(ConsistOf(patchOf("contested")), "a conflict is retried")
}

// A payload file changed between runs is applied by the next run, and a
// file added too; the rest is not written.
func TestResyncAppliesChangedPayload(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	ctx := e.ctx
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_kept.yaml":    configMap("kept"),
		"0000_10_changed.yaml": configMap("changed"),
	})
	c, reqs := countingClient(t, e.cp.Config)
	a := newApplier(c, e.guard, dir)
	snap := snapshotOf(t, e.guard)
	g.Expect(a.Apply(ctx, snap).Failed).To(BeEmpty())
	reqs.take()

	changed := strings.Replace(configMap("changed"), "from: manifest", "from: new payload", 1)
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_10_changed.yaml"), []byte(changed), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_20_added.yaml"), []byte(configMap("added")), 0o600)).To(Succeed())
	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Unchanged).To(Equal(1))
	writes, _, _ := reqs.take()
	g.Expect(withoutQuery(writes)).To(ConsistOf(patchOf("changed"), patchOf("added")))
	cm := &corev1.ConfigMap{}
	g.Expect(e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "changed"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("from", "new payload"))
	g.Expect(exists(ctx, e.c, &corev1.ConfigMap{}, "default", "added")).To(BeTrue())
}

// The payload role (manager manifests --rbac) allows what a resync reads:
// applied by an identity bound only to it (and to reading the
// ClusterVersion), the second run lists, finds everything unchanged, and
// writes nothing.
func TestResyncNeedsOnlyThePayloadRole(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	ctx := e.ctx
	dir := harness.WriteFiles(t, map[string]string{
		"0000_05_namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
		"0000_10_a.yaml":         configMap("a"),
		"0000_10_b.yaml":         strings.Replace(configMap("b"), "namespace: default", "namespace: team", 1),
		"0000_10_role.yaml":      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: team\nrules: []\n",
	})
	ms, invalid := manifest.Load(dir)
	g.Expect(invalid).To(BeEmpty())
	const user = "payload-applier"
	role := manifest.RBACFor(ms, "payload", "unused")
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, obj := range role.Objects() {
		switch o := obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			o.Subjects = subjects
		case *rbacv1.RoleBinding:
			o.Subjects = subjects
		}
		o := obj.(client.Object)
		if ns := o.GetNamespace(); ns != "" && ns != "default" {
			err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
		}
		g.Expect(e.c.Create(ctx, o)).To(Succeed())
	}
	g.Expect(e.c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "clusterversion-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"config.openshift.io"}, Resources: []string{"clusterversions"}, Verbs: []string{"get"}}}})).To(Succeed())
	g.Expect(e.c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "clusterversion-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "clusterversion-reader"},
		Subjects: subjects})).To(Succeed())
	cfg, err := e.cp.AddUser(user)
	g.Expect(err).NotTo(HaveOccurred())
	c, reqs := countingClient(t, cfg)
	a := newApplier(c, e.guard, dir)
	a.Status = nil
	snap := snapshotOf(t, e.guard)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Applied).To(HaveLen(len(ms)))
	reqs.take()
	run = a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Unchanged).To(Equal(len(ms)))
	writes, lists, _ := reqs.take()
	g.Expect(writes).To(BeEmpty())
	g.Expect(slices.Sorted(slices.Values(paths(lists)))).To(Equal([]string{
		"/api/v1/namespaces", "/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/team/configmaps",
		"/apis/rbac.authorization.k8s.io/v1/clusterroles"}))
}

// A Secret is never listed (list would read every Secret of its
// namespace): it is applied every resync, even when remembered.
func TestResyncNeverListsSecrets(t *testing.T) {
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetNamespace("team")
	secret.SetName("key")
	// A nil reader: a list would panic.
	r := newResync(nil, logr.Discard(), map[manifest.ObjectID]record{manifest.IDOf(secret): {}})
	if r.unchanged(t.Context(), secret) {
		t.Error("a remembered Secret was skipped; it must be applied without a list")
	}
}

package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RBAC is the least privilege that applying a payload needs: a ClusterRole
// for its cluster-scoped objects and one Role per namespace it writes into,
// each bound to the operator's ServiceAccount.
type RBAC struct {
	ClusterRole        rbacv1.ClusterRole
	ClusterRoleBinding rbacv1.ClusterRoleBinding
	Roles              []rbacv1.Role
	RoleBindings       []rbacv1.RoleBinding
}

// Objects are the RBAC objects in a stable order, for printing.
func (r RBAC) Objects() []any {
	out := []any{&r.ClusterRole, &r.ClusterRoleBinding}
	for i := range r.Roles {
		out = append(out, &r.Roles[i], &r.RoleBindings[i])
	}
	return out
}

// RBACFor derives the rules from every manifest of ms, whatever feature set
// includes it (a restart may bring any of them in): get and patch (what
// server-side apply does) by resourceNames, delete by resourceNames for
// manifests marked for deletion (and no patch), no patch for create-only
// manifests, and create, which RBAC cannot restrict by name, for the
// resource in its namespace, or cluster-wide for a cluster-scoped kind.
// Manifests that are applied need list there too: a resync reads what it
// applied with one metadata-only list per kind and namespace, which RBAC
// cannot restrict by name either. A manifest with metadata.namespace is
// taken as namespaced; the operator checks that against the server's
// RESTMapper when it applies. name names every object; subject is the
// ServiceAccount, with no namespace (kustomize fills it in).
func RBACFor(ms []Manifest, name, subject string) RBAC {
	// rules[namespace][group/resource] -> verbs -> names
	type key struct{ group, resource string }
	rules := map[string]map[key]map[string]map[string]bool{}
	add := func(ns string, k key, verb, objName string) {
		if rules[ns] == nil {
			rules[ns] = map[key]map[string]map[string]bool{}
		}
		if rules[ns][k] == nil {
			rules[ns][k] = map[string]map[string]bool{}
		}
		if rules[ns][k][verb] == nil {
			rules[ns][k][verb] = map[string]bool{}
		}
		if objName != "" {
			rules[ns][k][verb][objName] = true
		}
	}
	for _, m := range ms {
		gvk := m.Object.GroupVersionKind()
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		k := key{gvk.Group, plural.Resource}
		ns, objName := m.Object.GetNamespace(), m.Object.GetName()
		if m.Object.GetAnnotations()[deleteAnnotation] == "true" {
			add(ns, k, "get", objName)
			add(ns, k, "delete", objName)
			continue
		}
		add(ns, k, "get", objName)
		add(ns, k, "create", "")
		if m.Object.GetAnnotations()[createOnlyAnnotation] != "true" {
			add(ns, k, "patch", objName) // create-only objects are never updated
			if !Sensitive(gvk.GroupKind()) {
				add(ns, k, "list", "")
			}
		}
	}
	policy := func(byKey map[key]map[string]map[string]bool) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
			return strings.Compare(a.group+"/"+a.resource, b.group+"/"+b.resource)
		}) {
			verbs := byKey[k]
			// Verbs without names (create, list) share a rule, and so do
			// verbs with the same names.
			var nameless []string
			byNames := map[string][]string{}
			for _, verb := range slices.Sorted(maps.Keys(verbs)) {
				if len(verbs[verb]) == 0 {
					nameless = append(nameless, verb)
					continue
				}
				names := strings.Join(slices.Sorted(maps.Keys(verbs[verb])), ",")
				byNames[names] = append(byNames[names], verb)
			}
			if len(nameless) > 0 {
				out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: nameless})
			}
			for _, names := range slices.Sorted(maps.Keys(byNames)) {
				out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource},
					ResourceNames: strings.Split(names, ","), Verbs: byNames[names]})
			}
		}
		return out
	}
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: subject}}
	r := RBAC{
		ClusterRole: rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: policy(rules[""])},
		ClusterRoleBinding: rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: sa},
	}
	for _, ns := range slices.Sorted(maps.Keys(rules)) {
		if ns == "" {
			continue
		}
		meta := metav1.ObjectMeta{Name: name, Namespace: ns}
		r.Roles = append(r.Roles, rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: policy(rules[ns])})
		r.RoleBindings = append(r.RoleBindings, rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: sa})
	}
	return r
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: schema.GroupVersion{Group: rbacv1.GroupName, Version: "v1"}.String(), Kind: kind}
}

// String is the rules for people: one line per rule.
func (r RBAC) String() string {
	var b strings.Builder
	line := func(scope string, rules []rbacv1.PolicyRule) {
		for _, p := range rules {
			fmt.Fprintf(&b, "%s: %s %s/%s %v\n", scope, strings.Join(p.Verbs, ","), p.APIGroups[0], p.Resources[0], p.ResourceNames)
		}
	}
	line("cluster", r.ClusterRole.Rules)
	for _, role := range r.Roles {
		line("namespace "+role.Namespace, role.Rules)
	}
	return b.String()
}

// Sensitive says whether a kind's list would hand the operator contents it
// has no need to read: list cannot be limited by name, so list on Secrets
// reads every Secret of the namespace. The resync does not list these
// kinds (it applies their objects every time) and the role grants no list
// on them.
func Sensitive(gk schema.GroupKind) bool {
	return gk.Group == "" && gk.Kind == "Secret"
}

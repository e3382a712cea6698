package deploy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// testVersion is the release version the tests publish FeatureGate status
// for and run the operator with.
const testVersion = "4.18.0"

// startControlPlane starts etcd and kube-apiserver with the OpenShift CRDs,
// stopped when the test ends.
func startControlPlane(t *testing.T) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	cp := harness.StartControlPlane(t, controlplane.Options{})
	c, err := controlplane.NewClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cp, c
}

// createFeatureGate creates FeatureGate/cluster with set, and publishes its
// status for testVersion with the given gates, as the cluster-config-operator
// would.
func createFeatureGate(t *testing.T, c client.Client, set configv1.FeatureSet, enabled, disabled []string) *configv1.FeatureGate {
	t.Helper()
	return harness.CreateFeatureGate(t, c, controlplane.FeatureGate(set, controlplane.StatusGates(testVersion, enabled, disabled)))
}

// applyForReal server-side applies objs as the admin.
func applyForReal(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("deploy-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// serviceAccount is a ServiceAccount by namespace and name.
type serviceAccount struct{ namespace, name string }

func (sa serviceAccount) String() string {
	return "system:serviceaccount:" + sa.namespace + ":" + sa.name
}

// installOperatorRBAC applies, for real, the rendered Namespace,
// ServiceAccount, roles and bindings (nothing else: no Deployment runs here),
// and returns the operator's ServiceAccount.
func installOperatorRBAC(ctx context.Context, t *testing.T, c client.Client) serviceAccount {
	t.Helper()
	objs := rendered(t)
	applyForReal(ctx, t, c, ofKinds(objs, "Namespace"))
	applyForReal(ctx, t, c, ofKinds(objs, "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"))
	obj := find(t, objs, "ServiceAccount", "controller-manager")
	sa := serviceAccount{namespace: obj.GetNamespace(), name: obj.GetName()}
	untilAuthorized(ctx, t, c, objs, sa)
	return sa
}

// untilAuthorized waits until the API server's authorizer, which learns of
// roles and bindings through its own informers, allows sa the first rule of
// every role bound to it: a process started earlier could be refused.
func untilAuthorized(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured, sa serviceAccount) {
	t.Helper()
	roles := map[string]*unstructured.Unstructured{}
	for _, r := range ofKinds(objs, "ClusterRole", "Role") {
		roles[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()] = r
	}
	checked := 0
	for _, b := range ofKinds(objs, "ClusterRoleBinding", "RoleBinding") {
		if !bindsServiceAccount(b, sa) {
			continue
		}
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		ns := b.GetNamespace() // a RoleBinding's Role is in its namespace
		if kind == "ClusterRole" {
			ns = ""
		}
		role, ok := roles[kind+"/"+ns+"/"+name]
		if !ok {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		if len(rules) == 0 {
			continue
		}
		rule, _ := rules[0].(map[string]any)
		attrs := &authorizationv1.ResourceAttributes{Namespace: b.GetNamespace(), Verb: first(rule, "verbs"), Group: first(rule, "apiGroups"), Resource: first(rule, "resources")}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: sa.String(), Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.namespace}, ResourceAttributes: attrs,
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, err
			}
			return review.Status.Allowed, nil
		}); err != nil {
			t.Fatalf("%s not allowed %+v through %s %s: %v", sa, *attrs, b.GetKind(), b.GetName(), err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no rendered binding grants %s a role", sa)
	}
	t.Logf("the authorizer allows %s the roles of %d bindings", sa, checked)
}

func bindsServiceAccount(b *unstructured.Unstructured, sa serviceAccount) bool {
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		if m["kind"] == "ServiceAccount" && m["name"] == sa.name && m["namespace"] == sa.namespace {
			return true
		}
	}
	return false
}

// first is the first string of a rule's list field, "" when it has none.
func first(rule map[string]any, field string) string {
	l, _ := rule[field].([]any)
	if len(l) == 0 {
		return ""
	}
	s, _ := l[0].(string)
	return s
}

// tokenConfig mints a token for sa with the TokenRequest API, as the kubelet
// does for a pod, and returns a client configuration that authenticates with
// it alone: the API server's CA and the bearer token, no client certificate.
func tokenConfig(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, sa serviceAccount) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.namespace).CreateToken(ctx, sa.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return &rest.Config{
		Host:            cp.Host(),
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData},
	}
}

// createServiceAccount creates a ServiceAccount as the admin.
func createServiceAccount(ctx context.Context, t *testing.T, c client.Client, sa serviceAccount) {
	t.Helper()
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.namespace, Name: sa.name}}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create ServiceAccount %s: %v", sa, err)
	}
}

// startOperator starts the manager built for this run with args alone;
// probe is the health probe address they give it.
func startOperator(t *testing.T, probe string, args ...string) *harness.Process {
	t.Helper()
	return harness.StartT(t, harness.Options{Name: "operator", Path: managerBin, Args: args, Probe: probe})
}

// port is the numeric port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(fmt.Errorf("port of %q: %w", addr, err))
	}
	return n
}

package deploy

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	rules := map[string][]rbacv1.PolicyRule{} // by kind/namespace/name
	for _, u := range ofKinds(objs, "ClusterRole", "Role") {
		var r rbacv1.Role // a ClusterRole without aggregation has the same fields
		convert(t, u, &r)
		rules[u.GetKind()+"/"+r.Namespace+"/"+r.Name] = r.Rules
	}
	checked := 0
	for _, u := range ofKinds(objs, "ClusterRoleBinding", "RoleBinding") {
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		convert(t, u, &b)
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.name && s.Namespace == sa.namespace
		}) {
			continue
		}
		roleNamespace := b.Namespace // a RoleBinding's Role is in its namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNamespace = ""
		}
		bound := rules[b.RoleRef.Kind+"/"+roleNamespace+"/"+b.RoleRef.Name]
		if len(bound) == 0 || len(bound[0].Resources) == 0 {
			continue
		}
		rule := bound[0]
		attrs := &authorizationv1.ResourceAttributes{Namespace: b.Namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0]}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: sa.String(), Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.namespace}, ResourceAttributes: attrs,
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, err
			}
			return review.Status.Allowed, nil
		}); err != nil {
			t.Fatalf("%s not allowed %+v through %s %s: %v", sa, *attrs, u.GetKind(), b.Name, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no rendered binding grants %s a role", sa)
	}
	t.Logf("the authorizer allows %s the roles of %d bindings", sa, checked)
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

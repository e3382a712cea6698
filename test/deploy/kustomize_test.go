package deploy

import (
	"context"
	"flag"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/internal/config"
)

// What `kustomize build config/default` renders is accepted by a real API
// server, object by object (server-side apply, dry run: validation, defaulting
// and admission run, nothing is stored).
func TestKustomizeBuildAcceptedByAPIServer(t *testing.T) {
	g := NewWithT(t)
	objs := rendered(t)
	_, c := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service", "Deployment"} {
		g.Expect(kinds).To(HaveKey(kind), "kustomize build config/default renders no %s", kind)
	}
	g.Expect(kinds).NotTo(HaveKey("ServiceMonitor"), "the ServiceMonitor needs the Prometheus Operator's CRD; it is optional")

	// Namespaced objects can be dry-run only into a namespace that exists.
	applyForReal(ctx, t, c, ofKinds(objs, "Namespace"))
	for _, o := range objs {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("deploy-test"), client.ForceOwnership, client.DryRunAll)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s/%s refused", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// The rendered pieces fit together, and the Deployment is what the issue
// asks for: probes, restricted security context, resources, the config file
// mounted, and a termination grace period above the graceful shutdown
// timeout the manager actually uses (the mounted file with the args on top,
// computed by the manager's own config code).
func TestKustomizeBuildDeployment(t *testing.T) {
	g := NewWithT(t)
	objs := rendered(t)
	var dep appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "controller-manager"), &dep)
	pod := dep.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	ctr := pod.Containers[0]

	// Probes on the health port.
	g.Expect(ctr.LivenessProbe).NotTo(BeNil())
	g.Expect(ctr.LivenessProbe.HTTPGet).NotTo(BeNil())
	g.Expect(ctr.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(ctr.LivenessProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8081)))
	g.Expect(ctr.ReadinessProbe).NotTo(BeNil())
	g.Expect(ctr.ReadinessProbe.HTTPGet).NotTo(BeNil())
	g.Expect(ctr.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(ctr.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8081)))

	// Restricted Pod Security Standard, at pod or container level.
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := ctr.SecurityContext
	g.Expect(sc).NotTo(BeNil(), "container securityContext")
	g.Expect(ptrTrue(sc.RunAsNonRoot) || ptrTrue(psc.RunAsNonRoot)).To(BeTrue(), "runAsNonRoot")
	g.Expect(ptrTrue(sc.ReadOnlyRootFilesystem)).To(BeTrue(), "readOnlyRootFilesystem")
	g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "allowPrivilegeEscalation")
	g.Expect(sc.Capabilities).NotTo(BeNil())
	g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
	g.Expect(sc.Capabilities.Add).To(BeEmpty())
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	g.Expect(seccomp).NotTo(BeNil(), "seccompProfile")
	g.Expect(seccomp.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))

	g.Expect(ctr.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	g.Expect(ctr.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
	g.Expect(ctr.Resources.Limits).To(HaveKey(corev1.ResourceMemory))

	// The pod runs as the rendered ServiceAccount, which the bindings name.
	sa := find(t, objs, "ServiceAccount", "controller-manager")
	g.Expect(pod.ServiceAccountName).To(Equal(sa.GetName()))
	checkBindings(t, objs, sa)

	// The effective configuration, as the manager computes it.
	cfg := effectiveConfig(t, objs, pod, ctr)
	g.Expect(pod.TerminationGracePeriodSeconds).NotTo(BeNil())
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	g.Expect(grace).To(BeNumerically(">", cfg.GracefulShutdownTimeout.Duration),
		"terminationGracePeriodSeconds must leave the manager its gracefulShutdownTimeout")
	g.Expect(port(t, cfg.Health.BindAddress)).To(Equal(8081), "health.bindAddress serves the probes")
	g.Expect(cfg.MetricsSecure()).To(BeTrue(), "metrics are served over HTTPS with authn/authz")
	g.Expect(cfg.LeaderElection.LeaderElect).To(HaveValue(BeTrue()))
	mounts := map[string]bool{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.MountPath] = true
	}
	g.Expect(mounts).To(HaveKey(cfg.ManifestsDir), "manifestsDir %q is mounted", cfg.ManifestsDir)

	// The metrics Service reaches the pod's metrics port.
	var svc corev1.Service
	convert(t, find(t, objs, "Service", "metrics-service"), &svc)
	for k, v := range svc.Spec.Selector {
		g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v), "Service selector")
	}
	metricsPort := int32(port(t, cfg.Metrics.BindAddress))
	g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("TargetPort", intstr.FromInt32(metricsPort))))
	g.Expect(ctr.Ports).To(ContainElement(HaveField("ContainerPort", metricsPort)))
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// checkBindings: every binding refers to a rendered role and binds the
// operator's ServiceAccount, in its namespace.
func checkBindings(t *testing.T, objs []*unstructured.Unstructured, sa *unstructured.Unstructured) {
	g := NewWithT(t)
	roles := map[string]bool{}
	for _, r := range ofKinds(objs, "ClusterRole", "Role") {
		roles[r.GetKind()+"/"+r.GetName()] = true
	}
	bindings := ofKinds(objs, "ClusterRoleBinding", "RoleBinding")
	g.Expect(bindings).NotTo(BeEmpty())
	for _, u := range bindings {
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		convert(t, u, &b)
		g.Expect(roles).To(HaveKey(b.RoleRef.Kind+"/"+b.RoleRef.Name), "%s %s refers to a role that is not rendered", u.GetKind(), u.GetName())
		g.Expect(b.Subjects).To(ContainElement(rbacv1.Subject{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: sa.GetNamespace()}),
			"%s %s binds the operator's ServiceAccount", u.GetKind(), u.GetName())
	}
}

// effectiveConfig resolves the container's --config file to the ConfigMap
// mounted there, and runs the manager's own flag and file handling
// (config.BindFlags, Complete) over it and the container's args.
func effectiveConfig(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, ctr corev1.Container) *v1alpha1.OperatorConfig {
	t.Helper()
	g := NewWithT(t)
	args := ctr.Args
	if len(ctr.Command) > 1 {
		args = slices.Concat(ctr.Command[1:], ctr.Args)
	}
	var configPath string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+config.FlagConfig+"="); ok {
			configPath = v
		}
	}
	g.Expect(configPath).NotTo(BeEmpty(), "the manager is given --config=<file>")

	// The volume mounted at the file's directory, and the ConfigMap key.
	var volume string
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == path.Dir(configPath) {
			volume = m.Name
		}
	}
	g.Expect(volume).NotTo(BeEmpty(), "no volume mounted at %s", path.Dir(configPath))
	var cmName string
	for _, v := range pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	g.Expect(cmName).NotTo(BeEmpty(), "volume %s is not a ConfigMap", volume)
	var cm corev1.ConfigMap
	convert(t, find(t, objs, "ConfigMap", cmName), &cm)
	data, ok := cm.Data[path.Base(configPath)]
	g.Expect(ok).To(BeTrue(), "ConfigMap %s has no key %s", cmName, path.Base(configPath))

	local := filepath.Join(t.TempDir(), "config.yaml")
	g.Expect(os.WriteFile(local, []byte(data), 0o600)).To(Succeed())
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := config.BindFlags(fs)
	// Only the OperatorConfig flags matter here; the others (zap, metrics
	// certificates) configure nothing in the file.
	var parse []string
	for _, a := range args {
		g.Expect(a).To(HavePrefix("-"), "args must be --name=value (a separate value cannot be told apart here)")
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == config.FlagConfig:
			parse = append(parse, "--"+config.FlagConfig+"="+local)
		case fs.Lookup(name) != nil:
			parse = append(parse, a)
		}
	}
	g.Expect(fs.Parse(parse)).To(Succeed())
	cfg, err := flags.Complete()
	g.Expect(err).NotTo(HaveOccurred(), "the Deployment's configuration is invalid")
	return cfg
}

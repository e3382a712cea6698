package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pod runs in a namespace that enforces the restricted Pod Security
// level (which refuses a pod that breaks it), and the container process is
// what the Deployment asks for, as the kernel sees it: UID and GID 65532,
// no capabilities, no privilege escalation, seccomp filtering, a
// read-only root file system.
func TestRestrictedPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx, pod := running(t, configv1.Default, 6*time.Minute)

	ns, err := cluster.Clientset.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	// Enforced: a pod running as root with the default capabilities is
	// refused in the same namespace.
	rogue := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rogue", Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "rogue", Image: operatorImage}}},
	}
	_, err = cluster.Clientset.CoreV1().Pods(namespace).Create(ctx, rogue, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a non-restricted pod: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("violates PodSecurity"))

	pid, err := cluster.ContainerPID(ctx, managerStatus(pod).ContainerID)
	g.Expect(err).NotTo(HaveOccurred())
	st := procStatus(t, pid)
	g.Expect(st).To(HaveKeyWithValue("Uid", "65532\t65532\t65532\t65532"))
	g.Expect(st).To(HaveKeyWithValue("Gid", "65532\t65532\t65532\t65532"))
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		g.Expect(st).To(HaveKeyWithValue(set, "0000000000000000"), "capabilities %s", set)
	}
	g.Expect(st).To(HaveKeyWithValue("NoNewPrivs", "1"))
	g.Expect(st).To(HaveKeyWithValue("Seccomp", "2"), "seccomp filter mode (RuntimeDefault)")
	g.Expect(rootMountOptions(t, pid)).To(ContainElement("ro"), "the root file system is read-only")
}

// procStatus is /proc/<pid>/status as key -> value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// rootMountOptions are the mount options of / as the process sees it.
func rootMountOptions(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			return strings.Split(f[5], ",")
		}
	}
	t.Fatalf("no / in /proc/%d/mountinfo", pid)
	return nil
}

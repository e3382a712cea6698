package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// A payload shaped like an OpenShift release payload: per component a
// CRD, a namespace, service accounts, RBAC, config maps and deployments, in
// files named 0000_<run level>_<component>_<index>_<what>.yaml.
//
// CRDs and namespaces sit in early run levels (0000_03, 0000_05), before
// the component's run level: the operator applies one run level's
// manifests in parallel, so an object and its namespace in the same run
// level would race (the cluster-version-operator orders within a level by
// component; this operator does not).
const (
	payloadComponents   = 40
	manifestsPerComp    = 20
	techPreviewShare    = 10 // one component in 10 is feature-set gated
	payloadCRDs         = 40 // components past it get a ConfigMap for their CRD
	configMapsPerComp   = 8
	deploymentsPerComp  = 2
	serviceAccountsComp = 2
	rolesPerComp        = 2
)

var runLevels = []string{"10", "20", "30", "40", "50", "60", "70", "80", "90"}

// payloadStats counts what generatePayload wrote.
type payloadStats struct {
	Files, Gated int
	Kinds        map[string]int
}

// generatePayload writes the payload of components components
// (manifestsPerComp manifests each) into dir, one manifest per file. A real
// payload's CRDs do not grow with it (each CRD is an API group the API
// server serves and rebuilds its OpenAPI for), so only the first
// payloadCRDs components have one.
func generatePayload(dir string, components int) (payloadStats, error) {
	st := payloadStats{Kinds: map[string]int{}}
	techPreviewComps := components / techPreviewShare
	for c := 0; c < components; c++ {
		comp := fmt.Sprintf("bench-component-%02d", c)
		ns := "openshift-" + comp
		level := runLevels[c%len(runLevels)]
		// Feature-set gating in both spellings a payload uses.
		gate := ""
		switch {
		case c < techPreviewComps/2:
			gate = `release.openshift.io/feature-set: "TechPreviewNoUpgrade"`
		case c < techPreviewComps:
			gate = `release.openshift.io/feature-gate: "TechPreviewNoUpgrade"` // 4.10 spelling
		}
		write := func(file, kind, body string) error {
			annotations := "    include.release.openshift.io/self-managed-high-availability: \"true\"\n"
			if gate != "" {
				annotations += "    " + gate + "\n"
				st.Gated++
			}
			body = strings.ReplaceAll(body, "ANNOTATIONS\n", annotations)
			st.Files++
			st.Kinds[kind]++
			return os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644)
		}
		prefix := func(lv string, i int, what string) string {
			return fmt.Sprintf("0000_%s_%s_%02d_%s.yaml", lv, comp, i, what)
		}
		group := fmt.Sprintf("%s.bench.featuregate-operator.io", comp)
		kind := fmt.Sprintf("BenchResource%02d", c)
		plural := strings.ToLower(kind) + "s"
		if c < payloadCRDs {
			if err := write(prefix("03", 0, "crd"), "CustomResourceDefinition", fmt.Sprintf(crdTemplate, plural, group, group, kind, strings.ToLower(kind), plural)); err != nil {
				return st, err
			}
		} else if err := write(prefix(level, 0, "configmap-crd"), "ConfigMap", fmt.Sprintf(configMapTemplate, comp, configMapsPerComp, ns, configData(c, configMapsPerComp))); err != nil {
			return st, err
		}
		if err := write(prefix("05", 0, "namespace"), "Namespace", fmt.Sprintf(namespaceTemplate, ns)); err != nil {
			return st, err
		}
		i := 1
		for n := 0; n < serviceAccountsComp; n++ {
			if err := write(prefix(level, i, fmt.Sprintf("serviceaccount-%d", n)), "ServiceAccount", fmt.Sprintf(serviceAccountTemplate, comp, n, ns)); err != nil {
				return st, err
			}
			i++
		}
		for n := 0; n < rolesPerComp; n++ {
			if err := write(prefix(level, i, fmt.Sprintf("role-%d", n)), "Role", fmt.Sprintf(roleTemplate, comp, n, ns, group)); err != nil {
				return st, err
			}
			i++
			if err := write(prefix(level, i, fmt.Sprintf("rolebinding-%d", n)), "RoleBinding", fmt.Sprintf(roleBindingTemplate, comp, n, ns, comp, n, comp, n, ns)); err != nil {
				return st, err
			}
			i++
		}
		if err := write(prefix(level, i, "clusterrole"), "ClusterRole", fmt.Sprintf(clusterRoleTemplate, comp, group, plural, plural)); err != nil {
			return st, err
		}
		i++
		if err := write(prefix(level, i, "clusterrolebinding"), "ClusterRoleBinding", fmt.Sprintf(clusterRoleBindingTemplate, comp, comp, comp, ns)); err != nil {
			return st, err
		}
		i++
		for n := 0; n < configMapsPerComp; n++ {
			if err := write(prefix(level, i, fmt.Sprintf("configmap-%d", n)), "ConfigMap", fmt.Sprintf(configMapTemplate, comp, n, ns, configData(c, n))); err != nil {
				return st, err
			}
			i++
		}
		for n := 0; n < deploymentsPerComp; n++ {
			if err := write(prefix(level, i, fmt.Sprintf("deployment-%d", n)), "Deployment", deployment(comp, ns, n)); err != nil {
				return st, err
			}
			i++
		}
	}
	return st, nil
}

// copyIncluded copies into dst the files of src whose every manifest the
// operator includes under the Default feature set, decided by the
// operator's own rules: kubectl then applies exactly what the operator does.
func copyIncluded(src, dst string) (int, error) {
	ms, invalid := manifest.Load(src)
	if len(invalid) > 0 {
		return 0, fmt.Errorf("payload: %w", invalid[0])
	}
	excluded := map[string]bool{}
	for _, m := range ms {
		if !manifest.Include(m.Object, manifest.Cluster{Features: manifest.NewFeatures("Default")}).Included {
			excluded[m.File] = true
		}
	}
	n := 0
	for _, m := range ms {
		if excluded[m.File] || m.Index > 0 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, m.File))
		if err != nil {
			return n, err
		}
		if err := os.WriteFile(filepath.Join(dst, m.File), data, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// configData is a few keys of config, 1 to 4 KiB, as operators ship.
func configData(c, n int) string {
	var b strings.Builder
	lines := 8 + (c*7+n*13)%24
	b.WriteString("  config.yaml: |\n")
	for l := 0; l < lines; l++ {
		fmt.Fprintf(&b, "    key%02d: \"value %d of component %d, config map %d, padded to look like real configuration text\"\n", l, l, c, n)
	}
	fmt.Fprintf(&b, "  version: \"%d\"\n", n)
	return b.String()
}

func deployment(comp, ns string, n int) string {
	return fmt.Sprintf(deploymentTemplate, comp, n, ns, comp, n, comp, n, comp, n, comp, comp, comp, n)
}

const crdTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s.%s
  annotations:
ANNOTATIONS
spec:
  group: %s
  names:
    kind: %s
    singular: %s
    plural: %s
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas:
                type: integer
                minimum: 0
              image:
                type: string
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

const namespaceTemplate = `apiVersion: v1
kind: Namespace
metadata:
  name: %s
  annotations:
ANNOTATIONS
    openshift.io/node-selector: ""
  labels:
    openshift.io/cluster-monitoring: "true"
    openshift.io/run-level: "1"
`

const serviceAccountTemplate = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: %s-sa-%d
  namespace: %s
  annotations:
ANNOTATIONS
`

const roleTemplate = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %s-role-%d
  namespace: %s
  annotations:
ANNOTATIONS
rules:
- apiGroups: [""]
  resources: ["configmaps", "secrets", "services", "endpoints", "events"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments", "daemonsets", "replicasets"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
- apiGroups: ["%s"]
  resources: ["*"]
  verbs: ["*"]
`

const roleBindingTemplate = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %s-rolebinding-%d
  namespace: %s
  annotations:
ANNOTATIONS
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: %s-role-%d
subjects:
- kind: ServiceAccount
  name: %s-sa-%d
  namespace: %s
`

const clusterRoleTemplate = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %s
  annotations:
ANNOTATIONS
rules:
- apiGroups: ["config.openshift.io"]
  resources: ["featuregates", "clusteroperators", "clusterversions", "infrastructures"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["%s"]
  resources: ["%s", "%s/status"]
  verbs: ["get", "list", "watch", "update", "patch"]
`

const clusterRoleBindingTemplate = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %s
  annotations:
ANNOTATIONS
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: %s
subjects:
- kind: ServiceAccount
  name: %s-sa-0
  namespace: %s
`

const configMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s-config-%d
  namespace: %s
  annotations:
ANNOTATIONS
data:
%s`

const deploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s-%d
  namespace: %s
  annotations:
ANNOTATIONS
  labels:
    app: %s-%d
spec:
  replicas: 1
  selector:
    matchLabels:
      app: %s-%d
  strategy:
    type: RollingUpdate
  template:
    metadata:
      annotations:
        target.workload.openshift.io/management: '{"effect": "PreferredDuringScheduling"}'
      labels:
        app: %s-%d
    spec:
      serviceAccountName: %s-sa-0
      priorityClassName: system-cluster-critical
      nodeSelector:
        node-role.kubernetes.io/master: ""
      tolerations:
      - key: node-role.kubernetes.io/master
        operator: Exists
        effect: NoSchedule
      containers:
      - name: operator
        image: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0000000000000000000000000000000000000000000000000000000000000000
        command: ["/usr/bin/%s"]
        args: ["start", "--config=/var/run/configmaps/config/config.yaml", "-v=2"]
        env:
        - name: RELEASE_VERSION
          value: 4.99.0-bench
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        ports:
        - containerPort: 8443
          name: metrics
        resources:
          requests:
            cpu: 10m
            memory: 50Mi
        terminationMessagePolicy: FallbackToLogsOnError
        volumeMounts:
        - mountPath: /var/run/configmaps/config
          name: config
      volumes:
      - name: config
        configMap:
          name: %s-config-%d
`

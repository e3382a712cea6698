// Package monitor watches a cluster while a test moves it, and judges what
// it saw by the rules openshift/origin's monitor tests apply to every
// operator during an upgrade: a ClusterOperator is never Available=False
// nor Degraded=True, goes Progressing=True while it moves to a new version
// and ends reporting that version, and no container exits non-zero (exit 0,
// a graceful stop, is not a failure). The rules are origin's; the code is
// ours. RelatedObjects adds origin's checks of status.relatedObjects, which
// must-gather follows to collect an operator's objects.
//
// It watches rather than polls, so that a condition that flips and flips
// back between two polls is still seen.
package monitor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// Options says what to watch.
type Options struct {
	// ClusterOperator is the name of the ClusterOperator judged.
	ClusterOperator string
	// Namespaces are those whose containers must not exit non-zero.
	Namespaces []string
}

// Monitor records what it watches from Start until its context ends.
type Monitor struct {
	opts Options
	api  client.Client // what RelatedObjects resolves through

	mu         sync.Mutex
	events     []string // every transition seen, in order, for the failure message
	violations []string // what broke a rule as it happened
	conditions map[configv1.ClusterStatusConditionType]configv1.ConditionStatus
	// synced: the initial list is judged, so what follows happened after
	// Start; progressing are the messages of Progressing=True seen since.
	synced      bool
	progressing []string
	version     string // the last status.versions operator seen
	related     []configv1.ObjectReference
	exits       map[string]bool // terminations judged, by pod, container, ID and end
}

// Start watches the ClusterOperator and the pods of opts.Namespaces until
// ctx ends; it returns once both watches have their first list, so that
// what happens after Start is seen.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Monitor, error) {
	m := &Monitor{opts: opts, conditions: map[configv1.ClusterStatusConditionType]configv1.ConditionStatus{}, exits: map[string]bool{}}
	namespaces := map[string]cache.Config{}
	for _, ns := range opts.Namespaces {
		namespaces[ns] = cache.Config{}
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:   controlplane.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Namespaces: namespaces}},
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	if m.api, err = client.New(cfg, client.Options{Scheme: controlplane.Scheme()}); err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	var registrations []toolscache.ResourceEventHandlerRegistration
	for obj, observe := range map[client.Object]func(any){
		&configv1.ClusterOperator{}: m.observeClusterOperator,
		&corev1.Pod{}:               m.observePod,
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("monitor: informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { observe(o) },
			UpdateFunc: func(_, o any) { observe(o) },
		})
		if err != nil {
			return nil, fmt.Errorf("monitor: %w", err)
		}
		registrations = append(registrations, reg)
	}
	go func() { _ = c.Start(ctx) }()
	// Synced once the handlers, not only the informers, have seen the
	// initial list.
	if !toolscache.WaitForCacheSync(ctx.Done(), registrations[0].HasSynced, registrations[1].HasSynced) {
		return nil, fmt.Errorf("monitor: watches not synced: %w", ctx.Err())
	}
	m.mu.Lock()
	m.synced = true
	m.mu.Unlock()
	return m, nil
}

func (m *Monitor) observeClusterOperator(o any) {
	co, ok := o.(*configv1.ClusterOperator)
	if !ok || co.Name != m.opts.ClusterOperator {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.related = co.Status.RelatedObjects
	for _, c := range co.Status.Conditions {
		// Progressing stays True from one message to the next (a retry,
		// then the move): every message counts.
		if c.Type == configv1.OperatorProgressing && c.Status == configv1.ConditionTrue && m.synced &&
			(len(m.progressing) == 0 || m.progressing[len(m.progressing)-1] != c.Message) {
			m.progressing = append(m.progressing, c.Message)
		}
		if m.conditions[c.Type] == c.Status {
			continue
		}
		m.conditions[c.Type] = c.Status
		m.record("ClusterOperator %s %s=%s (%s: %s)", co.Name, c.Type, c.Status, c.Reason, c.Message)
		switch {
		case c.Type == configv1.OperatorAvailable && c.Status != configv1.ConditionTrue:
			m.violate("ClusterOperator %s went %s=%s (%s: %s): Available must never leave True", co.Name, c.Type, c.Status, c.Reason, c.Message)
		case c.Type == configv1.OperatorDegraded && c.Status == configv1.ConditionTrue:
			m.violate("ClusterOperator %s went Degraded=True (%s: %s)", co.Name, c.Reason, c.Message)
		}
	}
	for _, v := range co.Status.Versions {
		if v.Name == "operator" && v.Version != m.version {
			m.version = v.Version
			m.record("ClusterOperator %s versions operator=%s", co.Name, v.Version)
		}
	}
}

func (m *Monitor) observePod(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		for _, term := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if term == nil {
				continue
			}
			// A container that never ran has no ID: the pod, the
			// container and the end tell its terminations apart.
			key := fmt.Sprintf("%s/%s/%s/%s", pod.UID, s.Name, term.ContainerID, term.FinishedAt.UTC().Format(time.RFC3339Nano))
			if m.exits[key] {
				continue
			}
			m.exits[key] = true
			m.record("pod %s/%s container %s exited %d (%s)", pod.Namespace, pod.Name, s.Name, term.ExitCode, term.Reason)
			if term.ExitCode != 0 {
				m.violate("pod %s/%s container %s exited %d (%s): a non-zero exit is a container failure", pod.Namespace, pod.Name, s.Name, term.ExitCode, term.Reason)
			}
		}
	}
}

// record and violate are called with mu held.
func (m *Monitor) record(format string, args ...any) {
	m.events = append(m.events, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (m *Monitor) violate(format string, args ...any) {
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

// Violations are the rules broken so far, as they happened.
func (m *Monitor) Violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.violations)
}

// Upgraded judges a move to version: the rules broken so far, and also
// that Progressing=True naming version was seen after Start (a Progressing
// left over from before proves nothing) and that status.versions operator
// ended at version.
func (m *Monitor) Upgraded(version string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.violations)
	if !slices.ContainsFunc(m.progressing, func(msg string) bool { return strings.Contains(msg, version) }) {
		out = append(out, fmt.Sprintf("ClusterOperator %s never went Progressing=True naming %s during the move", m.opts.ClusterOperator, version))
	}
	if m.version != version {
		out = append(out, fmt.Sprintf("ClusterOperator %s reports versions operator=%q, not %q", m.opts.ClusterOperator, m.version, version))
	}
	return out
}

// RelatedObjects judges the last status.relatedObjects seen as origin
// does: at least one namespace (must-gather collects an operator's
// namespaces from there), at least one object that is not a namespace, and
// every reference naming an object that exists, under a resource the API
// server serves.
func (m *Monitor) RelatedObjects(ctx context.Context) []string {
	m.mu.Lock()
	related := slices.Clone(m.related)
	m.mu.Unlock()
	name := m.opts.ClusterOperator
	var out []string
	isNamespace := func(r configv1.ObjectReference) bool { return r.Group == "" && r.Resource == "namespaces" }
	if !slices.ContainsFunc(related, isNamespace) {
		out = append(out, fmt.Sprintf("ClusterOperator %s relates no namespace", name))
	}
	if !slices.ContainsFunc(related, func(r configv1.ObjectReference) bool { return !isNamespace(r) }) {
		out = append(out, fmt.Sprintf("ClusterOperator %s relates no object but namespaces", name))
	}
	for _, r := range related {
		ref := refString(r)
		gvk, err := m.api.RESTMapper().KindFor(schema.GroupVersionResource{Group: r.Group, Resource: r.Resource})
		if err != nil {
			out = append(out, fmt.Sprintf("ClusterOperator %s relates %s: resource not served: %v", name, ref, err))
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		if err := m.api.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, obj); err != nil {
			out = append(out, fmt.Sprintf("ClusterOperator %s relates %s: %v", name, ref, err))
		}
	}
	return out
}

// refString is r as kubectl names it: resource[.group] [namespace/]name.
func refString(r configv1.ObjectReference) string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Namespace != "" {
		return s + " " + r.Namespace + "/" + r.Name
	}
	return s + " " + r.Name
}

// Events is every transition seen, timestamped, for a failure message.
func (m *Monitor) Events() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

package main

import (
	"context"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// The reconciler is tested against featuregatetest.Gates: the test says what
// the snapshot holds, and simulates what the guard would see.

var key = types.NamespacedName{Namespace: "default", Name: "settings"}

func configMap(labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels}, Data: data}
}

var labelled = map[string]string{appLabel: appName}

// reconcile runs one reconcile of cm against gates, and returns the result
// and the ConfigMap as stored afterwards.
func reconcile(t *testing.T, gates *featuregatetest.Gates, cm *corev1.ConfigMap) (ctrl.Result, *corev1.ConfigMap) {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	r := &ConfigMapReconciler{Client: c, Gates: gates, Gate: "GateA", Resync: time.Minute}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatalf("get ConfigMap: %v", err)
	}
	return res, got
}

func TestReconcileWritesTheSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates *featuregatetest.Gates
		want  map[string]string
	}{
		{"enabled", featuregatetest.New(configv1.Default, "GateA"), map[string]string{"featureSet": "Default", "GateA": "enabled", "other": "kept"}},
		{"disabled", featuregatetest.New(configv1.TechPreviewNoUpgrade, "GateB"), map[string]string{"featureSet": "TechPreviewNoUpgrade", "GateA": "disabled", "other": "kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := reconcile(t, tc.gates, configMap(labelled, map[string]string{"other": "kept"}))
			if res.RequeueAfter != time.Minute {
				t.Errorf("RequeueAfter = %s, want the resync period", res.RequeueAfter)
			}
			if !equal(got.Data, tc.want) {
				t.Errorf("data = %v, want %v", got.Data, tc.want)
			}
		})
	}
}

func TestReconcileWritesOnlyWhenDifferent(t *testing.T) {
	cm := configMap(labelled, map[string]string{"featureSet": "Default", "GateA": "enabled"})
	cm.ResourceVersion = "7"
	_, got := reconcile(t, featuregatetest.New(configv1.Default, "GateA"), cm)
	if got.ResourceVersion != "7" {
		t.Errorf("ConfigMap written (resourceVersion %s) although it held the snapshot already", got.ResourceVersion)
	}
}

// A snapshot the guard cannot vouch for (none yet, an API outage, a change
// seen) is never acted on: the reconciler waits and looks again.
func TestReconcileWaitsWhileNotCurrent(t *testing.T) {
	stale := featuregatetest.New(configv1.Default, "GateA")
	stale.SetStale(true)
	changed := featuregatetest.New(configv1.Default, "GateA")
	changed.Change("gate GateA enabled -> disabled")
	for name, gates := range map[string]*featuregatetest.Gates{"no snapshot": {}, "stale": stale, "changed": changed} {
		t.Run(name, func(t *testing.T) {
			res, got := reconcile(t, gates, configMap(labelled, nil))
			if len(got.Data) != 0 {
				t.Errorf("acted on a snapshot that is not current: data = %v", got.Data)
			}
			if res.RequeueAfter != notCurrentRetry {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, notCurrentRetry)
			}
		})
	}
}

// Once the view is current again, the reconciler acts.
func TestReconcileActsOnceCurrentAgain(t *testing.T) {
	gates := featuregatetest.New(configv1.Default, "GateA")
	gates.SetStale(true)
	c := fake.NewClientBuilder().WithObjects(configMap(labelled, nil)).Build()
	r := &ConfigMapReconciler{Client: c, Gates: gates, Gate: "GateA", Resync: time.Minute}
	for _, stale := range []bool{true, false} {
		gates.SetStale(stale)
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), key, got); err != nil {
			t.Fatal(err)
		}
		if acted := got.Data["GateA"] == "enabled"; acted == stale {
			t.Errorf("stale=%v: data = %v", stale, got.Data)
		}
	}
}

func TestReconcileIgnoresOtherConfigMaps(t *testing.T) {
	res, got := reconcile(t, featuregatetest.New(configv1.Default, "GateA"), configMap(map[string]string{appLabel: "someone-else"}, nil))
	if len(got.Data) != 0 || res != (ctrl.Result{}) {
		t.Errorf("unlabelled ConfigMap touched: data = %v, result %+v", got.Data, res)
	}
}

func TestReconcileGoneConfigMap(t *testing.T) {
	r := &ConfigMapReconciler{Client: fake.NewClientBuilder().Build(), Gates: featuregatetest.New(configv1.Default), Gate: "GateA", Resync: time.Minute}
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile of a deleted ConfigMap = %+v, %v; want nothing to do", res, err)
	}
}

func equal(a, b map[string]string) bool {
	return len(a) == len(b) && contains(a, b)
}

// The preview controller annotates the consumer's ConfigMaps, once.
func TestPreviewAnnotatesOnce(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(configMap(labelled, nil)).Build()
	r := &PreviewReconciler{Client: c, Gate: "GateB"}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[previewAnnotation] != "GateB" {
		t.Errorf("annotations = %v, want %s=GateB", got.Annotations, previewAnnotation)
	}
}

// With the preview gate disabled in the snapshot nothing is registered (the
// manager is never touched: nil would panic).
func TestSetupPreviewSkipsADisabledGate(t *testing.T) {
	snap, _ := featuregatetest.New(configv1.Default, "GateA").Snapshot()
	if err := setupPreview("GateB")(nil, snap); err != nil {
		t.Fatal(err)
	}
}

// Package testenv is what the guard's own tests stand on: a real etcd and
// kube-apiserver (controller-runtime's envtest) with the FeatureGate CRD
// of the openshift/api this module resolves, and a logr.Logger whose lines
// tests assert on by key. It is internal so that the module's public
// surface is the guard and featuregatetest; it depends only on what the
// module requires, so that the tests run at every controller-runtime minor
// the module supports.
package testenv

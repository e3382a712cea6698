#!/usr/bin/env bash
# Runs the manager conformance suite (controller-runtime's own pkg/manager
# specs against a stock and a guarded manager; docs/conformance.md) at
# go.mod's controller-runtime (v0.25, with its k8s.io and openshift/api) and
# at the library's floor: the versions pkg/featuregate/go.mod pins, put in
# a copy of go.mod kept aside (-modfile), as hack/test-library.sh does for
# the library itself, with the build tag conformance_floor, which selects
# the floor's own specs. CONFORMANCE_MATRIX="newest floor" names the cells;
# CONFORMANCE_RUN_SKIPPED=gap (or all) runs the listed specs too, to see
# them fail. KUBEBUILDER_ASSETS must name etcd, kube-apiserver and kubectl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cells=${CONFORMANCE_MATRIX:-"newest floor"}
timeout=${CONFORMANCE_TIMEOUT:-20m}
aside=$(mktemp -d)
trap 'rm -rf "$aside"' EXIT
cd "$here"
for cell in $cells; do
	case $cell in
	newest)
		echo "== conformance at go.mod's $(go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime k8s.io/api | tr '\n' ' ')"
		go test -count=1 -timeout "$timeout" -v . -ginkgo.no-color
		;;
	floor)
		# The library's floor, as its own go.mod states it.
		mapfile -t pins < <(cd ../../pkg/featuregate && go list -m -f '{{.Path}}@{{.Version}}' \
			sigs.k8s.io/controller-runtime k8s.io/api k8s.io/apimachinery k8s.io/client-go github.com/openshift/api)
		[ "${#pins[@]}" -eq 5 ] || { echo "run.sh: the floor's pins not read from pkg/featuregate/go.mod" >&2; exit 1; }
		modfile=$aside/floor.mod
		cp go.mod "$modfile"
		cp go.sum "${modfile%.mod}.sum"
		go get -modfile="$modfile" "${pins[@]}" # prints what it lowers
		go mod tidy -modfile="$modfile"
		echo "== conformance at the library's floor: ${pins[*]}"
		GOFLAGS="${GOFLAGS:+$GOFLAGS }-modfile=$modfile" go test -tags conformance_floor -count=1 -timeout "$timeout" -v . -ginkgo.no-color
		;;
	*)
		echo "run.sh: unknown cell $cell (newest, floor)" >&2
		exit 2
		;;
	esac
done

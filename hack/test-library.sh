#!/usr/bin/env bash
# Runs the tests of the library module (pkg/featuregate) at each
# controller-runtime minor it supports, each with its k8s.io minor: the
# floor is the module's own go.mod; the others raise it in a go.mod kept
# aside (-modfile), the way an adopter's requirements raise it. Cells are
# "controller-runtime:k8s.io[:openshift/api]" (LIBRARY_MATRIX overrides).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/pkg/featuregate
cells=${LIBRARY_MATRIX:-"floor v0.24.1:v0.36.5 v0.25.2:v0.37.2:v0.0.0-20260805215214-cfb63858e9d7"}
aside=$(mktemp -d)
trap 'rm -rf "$aside"' EXIT
cd "$lib"
for cell in $cells; do
	if [ "$cell" = floor ]; then
		echo "== library at its floor: $(go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime k8s.io/api | tr '\n' ' ')"
		go test -count=1 ./...
		# What adopters' code runs beside the guard's goroutines (Setup
		# and its controllers, held writes, the lease) once more under
		# the race detector: a controller started while Setup still sets
		# its reconciler's fields is a data race, not a failed assertion.
		echo "== the same, adopters' idioms under -race"
		go test -race -count=1 -run '^(TestGuardSetup.*|TestGuardHoldsEveryAdopterIdiomUntilTheSnapshot|TestGuardTakesTheLeaseAsSoonAsTheAPIReturns|TestGuardedManager.*|TestGuardWriteAfterStopWithoutSnapshotEnds)$' .
		continue
	fi
	IFS=: read -r cr k8s api <<<"$cell"
	modfile=$aside/$cr.mod
	cp go.mod "$modfile"
	cp go.sum "${modfile%.mod}.sum"
	mods=(sigs.k8s.io/controller-runtime@"$cr" k8s.io/api@"$k8s" k8s.io/apimachinery@"$k8s" k8s.io/client-go@"$k8s")
	[ -n "${api:-}" ] && mods+=(github.com/openshift/api@"$api")
	go get -modfile="$modfile" "${mods[@]}" >/dev/null
	go mod tidy -modfile="$modfile"
	echo "== library at controller-runtime $cr, k8s.io $k8s${api:+, openshift/api $api}"
	GOFLAGS=-modfile=$modfile go test -count=1 ./...
done

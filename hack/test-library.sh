#!/usr/bin/env bash
# Runs the tests of the library module (pkg/featuregate) at each
# controller-runtime minor it supports, each with its k8s.io minor: the
# floor is the module's own go.mod; the others raise it in a go.mod kept
# aside (-modfile), the way an adopter's requirements raise it. Cells are
# "controller-runtime:k8s.io[:openshift/api]" (LIBRARY_MATRIX overrides).
#
# Two phases. Every cell's test binaries are built first, one cell after
# another: building takes both cores. Then the cells run side by side, each
# against an API server of its own: the suite waits most of its time (on
# proofs, holds and lapses; it used a quarter of one core on this 2-core
# machine, 66 s of CPU in 257 s), so three suites at once take about the
# time of one. LIBRARY_SERIAL=1 runs them one after another.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/pkg/featuregate
cells=${LIBRARY_MATRIX:-"floor v0.24.1:v0.36.5 v0.25.2:v0.37.2:v0.0.0-20260805215214-cfb63858e9d7"}
aside=$(mktemp -d)
trap 'rm -rf "$aside"' EXIT
cd "$lib"

# The adopters' code that runs beside the guard's goroutines (Setup and its
# controllers, held writes, the lease), once more under the race detector at
# the floor: a controller started while Setup still sets its reconciler's
# fields is a data race, not a failed assertion.
race_run='^(TestGuardSetup.*|TestGuardHoldsEveryAdopterIdiomUntilTheSnapshot|TestGuardTakesTheLeaseAsSoonAsTheAPIReturns|TestGuardedManager.*|TestGuardWriteAfterStopWithoutSnapshotEnds)$'

# build <run> <title> <packages> [go test flags...]: builds each test
# package into $aside/<run>/, and writes what to run in $aside/<run>/plan,
# one line per package: "<binary> <package dir> <import path>". A cell's
# go.mod comes in GOFLAGS (-modfile), which its binaries keep at run time:
# the tests find the OpenShift CRDs with go list -m.
runs=()
build() {
	local run=$1 title=$2 pkgs=$3 i=0 path dir
	shift 3
	mkdir -p "$aside/$run"
	echo "$title" >"$aside/$run/title"
	echo "${GOFLAGS:-}" >"$aside/$run/goflags"
	while read -r path dir; do
		i=$((i + 1))
		go test "$@" -c -o "$aside/$run/$i.test" "$dir"
		echo "$aside/$run/$i.test $dir $path" >>"$aside/$run/plan"
	done < <(go list "$@" -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$pkgs")
	runs+=("$run")
}

for cell in $cells; do
	if [ "$cell" = floor ]; then
		echo "== building the library at its floor"
		build floor "== library at its floor: $(go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime k8s.io/api | tr '\n' ' ')" ./...
		build race "== the same, adopters' idioms under -race" . -race
		echo "-test.run=$race_run" >"$aside/race/args"
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
	echo "== building the library at controller-runtime $cr"
	GOFLAGS="${GOFLAGS:+$GOFLAGS }-modfile=$modfile" build "$cr" "== library at controller-runtime $cr, k8s.io $k8s${api:+, openshift/api $api}" ./...
done

# run <run>: runs its packages in turn, printed as go test prints them
# (a package's output only when it fails), into
# $aside/<run>/log, and its exit status into $aside/<run>/rc.
run() {
	local dir=$aside/$1 bin pkgdir path start rc=0 args=() goflags
	[ -f "$dir/args" ] && read -r -a args <"$dir/args"
	goflags=$(cat "$dir/goflags")
	while read -r bin pkgdir path; do
		start=$EPOCHREALTIME
		if (cd "$pkgdir" && GOFLAGS=$goflags "$bin" -test.paniconexit0 -test.timeout=30m "${args[@]}") >"$bin.out" 2>&1; then
			echo "ok  	$path	$(took "$start")"
		else
			rc=1
			cat "$bin.out"
			echo "FAIL	$path	$(took "$start")"
		fi
	done <"$dir/plan" >"$dir/log" 2>&1
	echo $rc >"$dir/rc"
}
took() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3fs", b - a }'; }

echo "== running the cells${LIBRARY_SERIAL:+ one after another}"
for r in "${runs[@]}"; do
	if [ -n "${LIBRARY_SERIAL:-}" ]; then run "$r"; else run "$r" & fi
done
wait
failed=0
for r in "${runs[@]}"; do
	cat "$aside/$r/title" "$aside/$r/log"
	[ "$(cat "$aside/$r/rc")" = 0 ] || failed=1
done
exit $failed

#!/usr/bin/env bash
# Compares the API of the library module (pkg/featuregate) with its last
# release, the newest pkg/featuregate/v* tag, and fails on an incompatible
# change: adopters require a version, and a minor release must keep their
# code building. Compatible additions are listed, not refused.
# APIDIFF_BASE names another commit to compare with (a clone without tags,
# or the API since a given change).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module=github.com/featuregate-operator/operator/pkg/featuregate
apidiff=${APIDIFF:-apidiff}
# Internal packages are not the API; apidiff says it skips each, every run.
run() { "$apidiff" "$@" 2> >(grep -v '^Ignoring internal package' >&2); }
cd "$root"
tag=${APIDIFF_BASE:-$(git tag --list 'pkg/featuregate/v*' --sort=-v:refname | head -n 1)}
if [ -z "$tag" ]; then
	echo "apidiff: no pkg/featuregate/v* tag in this clone (fetched without tags?): nothing to compare with" >&2
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive "$tag" pkg/featuregate | tar -x -C "$work"
(cd "$work/pkg/featuregate" && run -m -w "$work/base" "$module")
(cd pkg/featuregate && run -m -w "$work/head" "$module")
all=$(run -m "$work/base" "$work/head")
incompatible=$(run -m -incompatible "$work/base" "$work/head")
echo "apidiff: pkg/featuregate against $tag"
[ -n "$all" ] && echo "$all"
if [ -n "$incompatible" ]; then
	echo "apidiff: incompatible changes since $tag; keep the API, or release a new major version" >&2
	exit 1
fi

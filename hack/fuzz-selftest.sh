#!/usr/bin/env bash
# Checks hack/fuzz.sh's judgement on canned `go test -fuzz` outputs: Go's
# -fuzztime race (go.dev/issue/75804) passes, while a crasher, a failing input
# written beside the race's line, or any other failure message fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/go" <<'STUB'
#!/usr/bin/env bash
# Stands in for go test, printing the output FUZZ_CASE names.
echo "fuzz: elapsed: 0s, execs: 0 (0/sec), new interesting: 0 (total: 40)"
echo "fuzz: elapsed: 15s, execs: 36690 (2446/sec), new interesting: 3 (total: 43)"
case $FUZZ_CASE in
pass) printf 'PASS\nok\tp\t15.1s\n' ;;
race) printf -- '--- FAIL: FuzzX (15.14s)\n    context deadline exceeded\nFAIL\nexit status 1\nFAIL\tp\t15.2s\n'; exit 1 ;;
crasher) printf -- '--- FAIL: FuzzX (15.14s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:9: boom\n    \n    Failing input written to testdata/fuzz/FuzzX/abc\nFAIL\nexit status 1\n'; exit 1 ;;
race-and-input)
	mkdir -p "$FUZZ_PKG/testdata/fuzz/FuzzX" && touch "$FUZZ_PKG/testdata/fuzz/FuzzX/abc"
	printf -- '--- FAIL: FuzzX (15.14s)\n    context deadline exceeded\nFAIL\n'; exit 1 ;;
hung) printf -- '--- FAIL: FuzzX (15.14s)\n    context deadline exceeded\n    fuzzing process hung or terminated unexpectedly\nFAIL\n'; exit 1 ;;
esac
STUB
chmod +x "$tmp/go"

failed=0
for want in pass:0 race:0 crasher:1 race-and-input:1 hung:1; do
	case=${want%%:*} code=${want##*:}
	rm -rf "$tmp/p" && mkdir -p "$tmp/p"
	got=0
	FUZZ_CASE=$case FUZZ_PKG=$tmp/p GO=$tmp/go "$here/fuzz.sh" "$tmp/p:FuzzX" >"$tmp/out" 2>&1 || got=$?
	if [ "$got" != "$code" ]; then
		echo "fuzz-selftest: case $case: hack/fuzz.sh exited $got, want $code; it printed:" >&2
		sed 's/^/  /' "$tmp/out" >&2
		failed=1
	fi
done
[ "$failed" = 0 ] && echo "fuzz-selftest: hack/fuzz.sh judges all five canned runs as it should"
exit $failed

#!/usr/bin/env bash
# Runs each fuzz target for FUZZTIME and prints its rate; fails when a target
# makes fewer than FUZZ_MIN_RATE executions per second: a target that slow
# does not search (a sleep or a file write per input, say).
#
# Go 1.26's fuzzing coordinator can end a run that found nothing with
# "--- FAIL ... context deadline exceeded" when -fuzztime expires while a
# worker is busy (go.dev/issue/75804, fixed in Go 1.27). A run whose only
# failure is that line and which wrote no failing input is that race, not a
# finding: it is reported as such and judged by its rate like any other run.
# Anything else that fails, or any failing input written, fails the target.
set -euo pipefail
fuzztime=${FUZZTIME:-20s}
min_rate=${FUZZ_MIN_RATE:-100}
go=${GO:-go}
status=0

# inputs lists the failing inputs kept for a target, one path per line.
inputs() {
	local dir=$1/testdata/fuzz/$2
	if [ -d "$dir" ]; then find "$dir" -type f | sort; fi
}

# deadline_race reports whether log shows nothing failing but Go's deadline
# race: one "--- FAIL" whose message is exactly "context deadline exceeded",
# and no failing input named.
deadline_race() {
	local log=$1
	grep -q 'Failing input written to' "$log" && return 1
	[ "$(grep -c '^--- FAIL' "$log")" = 1 ] || return 1
	# The lines between "--- FAIL" and the closing FAIL: the failure's message.
	local msg
	msg=$(awk '/^--- FAIL/ { on = 1; next } /^FAIL/ { on = 0 } on' "$log" | sed 's/^ *//' | grep -v '^$' || true)
	[ "$msg" = "context deadline exceeded" ]
}

for target in "$@"; do
	pkg=${target%%:*} name=${target##*:}
	log=$(mktemp)
	before=$(inputs "$pkg" "$name")
	"$go" test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >"$log" 2>&1 || true
	grep -E '^(--- FAIL|FAIL|ok|    )' "$log" || true
	if grep -qE '^(--- FAIL|FAIL)' "$log"; then
		if [ "$(inputs "$pkg" "$name")" = "$before" ] && deadline_race "$log"; then
			echo "fuzz: $name: ended by Go's -fuzztime race (go.dev/issue/75804), no failing input written: not a finding"
		else
			status=1
		fi
	fi
	# The last progress line, "fuzz: elapsed: 1m3s, execs: 123456 (...)":
	# executions over the whole run.
	rate=$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' "$log" | tail -1 | awk '{
		e = $3; sub(/,$/, "", e); m = 0
		if (e ~ /m/) { split(e, p, "m"); m = p[1]; e = p[2] }
		sub(/s$/, "", e); secs = m * 60 + e
		n = $5
		if (secs > 0) printf "%d", n / secs
	}')
	rm -f "$log"
	if [ -z "$rate" ]; then
		echo "fuzz: $name: no rate reported" >&2
		status=1
	elif [ "$rate" -lt "$min_rate" ]; then
		echo "fuzz: $name: $rate executions per second, under $min_rate: it does not search" >&2
		status=1
	else
		echo "fuzz: $name: $rate executions per second"
	fi
done
exit $status

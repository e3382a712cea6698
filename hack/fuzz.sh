#!/usr/bin/env bash
# Runs each fuzz target for FUZZTIME and prints its rate; fails when a target
# makes fewer than FUZZ_MIN_RATE executions per second: a target that slow
# does not search (a sleep or a file write per input, say).
set -euo pipefail
fuzztime=${FUZZTIME:-20s}
min_rate=${FUZZ_MIN_RATE:-100}
status=0
for target in "$@"; do
	pkg=${target%%:*} name=${target##*:}
	log=$(mktemp)
	go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" 2>&1 | tee "$log" | grep -E '^(--- FAIL|FAIL|ok|    )' || true
	if grep -qE '^(--- FAIL|FAIL)' "$log"; then
		status=1
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

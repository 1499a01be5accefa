#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a fixed budget each (default 10s).
# Usage: [FUZZ_COVERAGE=0] scripts/fuzz.sh [FUZZTIME] [PACKAGES...]
#
# Each package's test binary is built once, while the previous package's targets run (one
# fuzzing worker each, -test.parallel=1, so that the build has the other core). By default
# it is built with the fuzzing instrumentation (`go test -c -fuzz=.`), which guides the
# mutations by coverage. FUZZ_COVERAGE=0 builds the plain test binary instead, whose
# objects the other test runs have already compiled: the fuzzer then mutates without
# coverage guidance. make test does that for its 2-second smoke pass (instrumenting every
# dependency costs minutes on two cores); make fuzz keeps the instrumentation. Targets run from their
# package's folder, so testdata/fuzz seeds and failing inputs live where `go test -fuzz`
# keeps them. A target fails when Go reports a failing input, a crash or a test error. A
# bare "context deadline exceeded" at the -fuzztime boundary, with no failing input
# written, is the Go fuzzing coordinator's shutdown race (go.dev/issue/75804, fixed in Go
# 1.27): that target is run again, up to four runs in all (short fuzz times hit the race
# often: two in a row were seen at 1 s); any other failure counts at once.
set -euo pipefail
fuzztime=${1:-10s}
shift || true
pkgs=("${@:-./...}")
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cache=$(go env GOCACHE)/fuzz
status=0

# deadline_flake LOG: true when LOG shows only the coordinator's deadline race.
deadline_flake() {
	grep -q 'context deadline exceeded' "$1" &&
		! grep -qE 'Failing input written|panic:|fuzzing process hung|testdata/fuzz/' "$1"
}

# targets DIR: the Fuzz functions declared in DIR's test files. Read from the source:
# `go test -list` would link a test binary for every package (minutes on two cores).
targets() {
	cat "$1"/*_test.go 2>/dev/null | sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' | sort -u
}

# The packages with targets, in go list order.
dirs=() names=()
while read -r dir pkg; do
	if [ -n "$(targets "$dir" || true)" ]; then
		dirs+=("$dir") names+=("$pkg")
	fi
done < <(go list -f '{{.Dir}} {{.ImportPath}}' "${pkgs[@]}")

instrument=(-fuzz=.)
[ "${FUZZ_COVERAGE:-1}" = 0 ] && instrument=()

# build I: the test binary of package I, in the background.
build() {
	go test -c "${instrument[@]}" -o "$work/$1.test" "${names[$1]}" >"$work/$1.build" 2>&1 &
	echo $! >"$work/$1.pid"
}

n=${#names[@]}
((n > 0)) && build 0
for ((i = 0; i < n; i++)); do
	pkg=${names[$i]} dir=${dirs[$i]}
	built=0
	wait "$(cat "$work/$i.pid")" || built=$?
	((i + 1 < n)) && build $((i + 1))
	if ((built != 0)); then
		echo "fuzz $pkg: build failed"
		cat "$work/$i.build"
		status=1
		continue
	fi
	for target in $(targets "$dir"); do
		echo "fuzz $pkg $target ($fuzztime)"
		log=$work/$i.log
		for attempt in 1 2 3 4; do
			if (cd "$dir" && "$work/$i.test" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$fuzztime" \
				-test.parallel=1 -test.fuzzcachedir="$cache/$pkg") >"$log" 2>&1; then
				break
			fi
			if ((attempt < 4)) && deadline_flake "$log"; then
				echo "  deadline race at the fuzztime boundary (no failing input); running again"
				continue
			fi
			cat "$log"
			status=1
			break
		done
	done
	rm -f "$work/$i.test"
done
exit $status

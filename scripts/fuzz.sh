#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a fixed budget each (default 10s).
# Usage: scripts/fuzz.sh [FUZZTIME] [PACKAGES...]
#
# A target fails when Go reports a failing input, a crash or a test error. A bare
# "context deadline exceeded" at the -fuzztime boundary, with no failing input written,
# is the Go fuzzing coordinator's shutdown race (go.dev/issue/75804, fixed in Go 1.27):
# that target is run once more, and only a second real failure counts.
set -euo pipefail
fuzztime=${1:-10s}
shift || true
pkgs=("${@:-./...}")
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
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

while read -r dir pkg; do
	for target in $(targets "$dir"); do
		echo "fuzz $pkg $target ($fuzztime)"
		for attempt in 1 2; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
				break
			fi
			if [ "$attempt" = 1 ] && deadline_flake "$log"; then
				echo "  deadline race at the fuzztime boundary (no failing input); running again"
				continue
			fi
			cat "$log"
			status=1
			break
		done
	done
done < <(go list -f '{{.Dir}} {{.ImportPath}}' "${pkgs[@]}")
exit $status

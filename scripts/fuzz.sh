#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a fixed budget each (default 10s).
# Usage: scripts/fuzz.sh [FUZZTIME] [PACKAGES...]
set -euo pipefail
fuzztime=${1:-10s}
shift || true
pkgs=("${@:-./...}")
cd "$(dirname "$0")/.."
status=0
while read -r pkg; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($fuzztime)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz.$$.log 2>&1; then
			cat /tmp/fuzz.$$.log
			status=1
		fi
	done
done < <(go list "${pkgs[@]}")
rm -f /tmp/fuzz.$$.log
exit $status

#!/usr/bin/env bash
# Installs the Debian packages the tests and the benchmark suite need, only those missing:
#   protobuf-compiler, libprotobuf-dev  protoc and its well-known types (google/protobuf/any.proto),
#                                       which TestGeneratedCodeIsCurrent regenerates the code with;
#   zookeeper                           the real server internal/zktest starts (it brings a JRE);
#   python3-numpy                       the NumPy peer of the benchmark suite (benchmarks/peers),
#                                       for Debian's /usr/bin/python3.
# Runs apt-get as root, through sudo otherwise. Without apt-get it names what is missing and fails.
# Usage: scripts/deps.sh [--check]   (--check: only report, exit 1 when something is missing)
set -euo pipefail

need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/any.proto ] || need+=(libprotobuf-dev)
{ [ -x /usr/share/zookeeper/bin/zkServer.sh ] && command -v java >/dev/null 2>&1; } || need+=(zookeeper)
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy)

if ((${#need[@]} == 0)); then
	exit 0
fi
if [ "${1:-}" = --check ]; then
	echo "missing Debian packages: ${need[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "scripts/deps.sh: missing ${need[*]} and apt-get is not available; install the equivalents by hand" >&2
	echo "  (protoc with the well-known types, Apache ZooKeeper at /usr/share/zookeeper with java, NumPy for /usr/bin/python3)" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "scripts/deps.sh: missing ${need[*]}; not root and sudo is not available" >&2
		exit 1
	fi
	sudo=(sudo)
fi
echo "scripts/deps.sh: installing ${need[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

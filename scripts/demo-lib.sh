# Shared by the README's demo scripts (agent-demo.sh, serve-demo.sh); source it after
# `cd` to the repository root. It defines BIN (the monolith binary: $1, or bin/monolith
# built here), WORK (a scratch folder), PIDS (processes stopped at exit), free_port, say,
# and start_zookeeper, which sets ZK to a standalone ZooKeeper on 127.0.0.1.

BIN=${1:-}
if [[ -z "$BIN" ]]; then
	go build -o bin/monolith ./cmd/monolith
	BIN=$PWD/bin/monolith
fi
JARS=/usr/share/java
[[ -f $JARS/zookeeper.jar ]] || { echo "ZooKeeper is not installed: sudo apt-get install zookeeper" >&2; exit 1; }

WORK=$(mktemp -d /tmp/monolith-demo.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# free_port: a random port in 20000–59999 that nothing on 127.0.0.1 accepts connections on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
say() { printf '\n$ %s\n' "$*"; }

# start_zookeeper: a standalone ZooKeeper on loopback, stopped at exit; sets ZK.
start_zookeeper() {
	local port
	port=$(free_port)
	mkdir -p "$WORK/zk"
	cat > "$WORK/zk/zoo.cfg" <<EOC
tickTime=500
dataDir=$WORK/zk
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
EOC
	local cp=$JARS/zookeeper.jar
	[[ -f $JARS/slf4j-simple.jar ]] && cp=$cp:$JARS/slf4j-simple.jar
	java -Xmx256m -Dzookeeper.admin.enableServer=false -cp "$cp" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zk/zoo.cfg" > "$WORK/zk/zookeeper.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do
		[[ "$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo ruok >&3 && cat <&3" 2>/dev/null)" == imok ]] && break
		sleep 0.2
	done
	ZK=127.0.0.1:$port
	echo "ZooKeeper on $ZK"
}

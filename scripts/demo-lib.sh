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

# start_zookeeper: a standalone ZooKeeper on loopback, stopped at exit; sets ZK. A port
# taken between free_port and ZooKeeper's bind (tests run beside each other) makes the
# server exit: it is started again on another port, three times at most. It fails, with
# the server's log, when no start answers `ruok` within 60 s.
start_zookeeper() {
	local port pid try
	local cp=$JARS/zookeeper.jar
	[[ -f $JARS/slf4j-simple.jar ]] && cp=$cp:$JARS/slf4j-simple.jar
	mkdir -p "$WORK/zk"
	for try in 1 2 3; do
		port=$(free_port)
		cat > "$WORK/zk/zoo.cfg" <<EOC
tickTime=500
dataDir=$WORK/zk
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
EOC
		java -Xmx256m -Dzookeeper.admin.enableServer=false -cp "$cp" \
			org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zk/zoo.cfg" > "$WORK/zk/zookeeper.log" 2>&1 &
		pid=$!
		PIDS+=("$pid")
		local deadline=$((SECONDS + 60))
		while ((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
			if [[ "$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo ruok >&3 && cat <&3" 2>/dev/null)" == imok ]]; then
				ZK=127.0.0.1:$port
				echo "ZooKeeper on $ZK"
				return 0
			fi
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			break # alive but silent for 60 s: not a port clash
		fi
		echo "ZooKeeper exited on port $port (start $try of 3)" >&2
	done
	echo "ZooKeeper did not answer ruok; its log:" >&2
	tail -n 30 "$WORK/zk/zookeeper.log" >&2
	exit 1
}

#!/usr/bin/env bash
# The serving-agent demo of the README (issue 8): a real ZooKeeper on 127.0.0.1, a fake
# exported model, agent-controller decl + pub, a v3 agent running `monolith fake-tfserving`
# as TF Serving, agent-client hb before and after unpub. Everything it starts stops when it
# exits. Usage: scripts/agent-demo.sh [MONOLITH_BINARY]  (default: builds bin/monolith).
set -euo pipefail

cd "$(dirname "$0")/.."
source scripts/demo-lib.sh "${1:-}"

# 1. ZooKeeper, standalone on loopback.
start_zookeeper

# 2. A fake exported model: entry and ps_0, ps_1, one version each.
say monolith fake-export --out "$WORK/export" --model test_ffm_model --num-ps 2
"$BIN" fake-export --out "$WORK/export" --model test_ffm_model --num-ps 2

# 3. Declare its sub-graphs and publish all of them to the layout.
say monolith agent-controller --cmd decl --zk_servers "$ZK" --bzid demo --export_base "$WORK/export"
"$BIN" agent-controller --cmd decl --zk_servers "$ZK" --bzid demo --export_base "$WORK/export"
say monolith agent-controller --cmd pub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'test_ffm_model:*'
"$BIN" agent-controller --cmd pub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'test_ffm_model:*'

# 4. A v3 agent; TF Serving is monolith's own double.
cat > "$WORK/agent.conf" <<EOF
bzid demo
deploy_type unified
agent_version 3
zk_servers $ZK
layout_pattern demo_layout
tfs_port_grpc $(free_port)
tfs_port_http $(free_port)
tfs_port_archon $(free_port)
agent_port $(free_port)
EOF
say MONOLITH_TFS_BINARY=\""$BIN fake-tfserving"\" monolith agent --conf agent.conf '&'
MONOLITH_TFS_BINARY="$BIN fake-tfserving" "$BIN" agent --conf "$WORK/agent.conf" --tfs_log "$WORK/tfs.log" 2> "$WORK/agent.log" &
AGENT=$!
PIDS+=($AGENT)

hb() { timeout 20 "$BIN" agent-client --conf "$WORK/agent.conf" --cmd_type hb --server_type ps --timeout 10s; }
wait_hb() { # wait until hb shows exactly $1 keys (bounded)
	for _ in $(seq 150); do
		n=$(hb 2>/dev/null | grep -c -- ' -> ' || true)
		[[ "$n" == "$1" ]] && return 0
		kill -0 "$AGENT" 2>/dev/null || { echo "the agent exited:" >&2; cat "$WORK/agent.log" >&2; exit 1; }
		sleep 0.2
	done
	echo "agent-client hb never showed $1 keys; agent log:" >&2; cat "$WORK/agent.log" >&2; exit 1
}

# 5. The published sub-graphs load and appear in HeartBeat with the agent's address.
wait_hb 3
say monolith agent-client --conf agent.conf --cmd_type hb --server_type ps
hb

# 6. Unpublish everything: the keys disappear.
say monolith agent-controller --cmd unpub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'test_ffm_model:*'
"$BIN" agent-controller --cmd unpub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'test_ffm_model:*'
wait_hb 0
say monolith agent-client --conf agent.conf --cmd_type hb --server_type ps
hb
echo "(no keys)"

# 7. SIGTERM: the agent stops its TF Serving and leaves ZooKeeper.
kill -TERM "$AGENT"
timeout 60 tail --pid="$AGENT" -f /dev/null || { echo "the agent did not stop within 60 s after SIGTERM" >&2; exit 1; }
wait "$AGENT"
echo
echo "agent stopped (exit 0)"

#!/usr/bin/env bash
# The serving end to end of the README (issue 21): planted data, training, `export --model`,
# agent-controller decl + pub on a real ZooKeeper, a v3 agent starting `monolith serve` as
# its TF Serving (MONOLITH_TFS_BINARY unset), the served version AVAILABLE, and `predict
# --server` beside `predict` and `evaluate` on the checkpoint, and `agent-client --cmd_type
# predict` through the agent. Everything it starts stops
# when it exits; with DEMO_KEEP=DIR the prediction files and the evaluation are copied there.
# With DEMO_TLS="--tls-ca CA --tls-cert CERT --tls-key KEY [--tls-mutual]" the agent, the
# `monolith serve` it starts and every client speak TLS, and a plaintext client is refused.
# Usage: scripts/serve-demo.sh [MONOLITH_BINARY]  (default: builds bin/monolith).
set -euo pipefail

cd "$(dirname "$0")/.."
source scripts/demo-lib.sh "${1:-}"
unset MONOLITH_TFS_BINARY
read -r -a TLS <<< "${DEMO_TLS:-}"

# 1. ZooKeeper, standalone on loopback.
start_zookeeper

# 2. Planted data, one epoch of FM on two in-process PS shards, the model exported.
say monolith gen --planted fm --seed 5 --rows 4000 --files 2 --vocab 50 --eval-rows 1000 --out data
"$BIN" gen --planted fm --seed 5 --rows 4000 --files 2 --vocab 50 --eval-rows 1000 --out "$WORK/data" > /dev/null
printf 'model: fm\ndata: data\nbatch_size: 128\nps: {shards: 2}\ncheckpoint: {dir: ckpt}\n' > "$WORK/fm.yaml"
say monolith train --config fm.yaml
"$BIN" train --config "$WORK/fm.yaml" --progress never
say monolith export --model --config fm.yaml --output models --name planted
"$BIN" export --model --config "$WORK/fm.yaml" --output "$WORK/models" --name planted

# 3. Declare the export (one sub-graph, "planted") and publish it.
say monolith agent-controller --cmd decl --zk_servers "$ZK" --bzid demo --export_base models --model_name planted
"$BIN" agent-controller --cmd decl --zk_servers "$ZK" --bzid demo --export_base "$WORK/models" --model_name planted
say monolith agent-controller --cmd pub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'planted:*'
"$BIN" agent-controller --cmd pub --zk_servers "$ZK" --bzid demo --layout demo_layout --model_name 'planted:*'

# 4. A unified v3 agent; its TF Serving is `monolith serve` on PORT3 (gRPC).
GRPC=$(free_port)
cat > "$WORK/agent.conf" <<EOC
bzid demo
deploy_type unified
agent_version 3
zk_servers $ZK
layout_pattern demo_layout
agent_port $(free_port)
EOC
say PORT3=$GRPC monolith agent --conf agent.conf '&'
PORT=$(free_port) PORT3=$GRPC PORT4=$(free_port) "$BIN" agent --conf "$WORK/agent.conf" --tfs_log "$WORK/tfs.log" "${TLS[@]}" 2> "$WORK/agent.log" &
AGENT=$!
PIDS+=($AGENT)

# 5. The published sub-graph loads: planted:planted is AVAILABLE.
status() { timeout 20 "$BIN" tfs-client --target "127.0.0.1:$GRPC" --model_name planted:planted --cmd_type status --timeout 10s "${TLS[@]}" 2>/dev/null; }
for i in $(seq 300); do
	status | grep -q AVAILABLE && break
	kill -0 "$AGENT" 2>/dev/null || { echo "the agent exited:" >&2; cat "$WORK/agent.log" >&2; exit 1; }
	[[ $i == 300 ]] && { echo "planted:planted never became AVAILABLE; agent log:" >&2; cat "$WORK/agent.log" "$WORK/tfs.log" >&2; exit 1; }
	sleep 0.2
done
say monolith tfs-client --target 127.0.0.1:$GRPC --model_name planted:planted --cmd_type status
status
if [[ ${#TLS[@]} -gt 0 ]]; then
	if timeout 20 "$BIN" tfs-client --target "127.0.0.1:$GRPC" --model_name planted:planted --cmd_type status --timeout 5s > /dev/null 2>&1; then
		echo "monolith serve answered a plaintext client under TLS" >&2; exit 1
	fi
	echo "monolith serve refused a plaintext client (TLS)"
fi
# The agent binds an AVAILABLE sub-graph at its next sync; HeartBeat then lists its address.
hb() { timeout 20 "$BIN" agent-client --conf "$WORK/agent.conf" --cmd_type hb --timeout 10s "${TLS[@]}" 2>/dev/null; }
for i in $(seq 300); do
	hb | grep -q '^planted:planted' && break
	[[ $i == 300 ]] && { echo "the agent never listed planted:planted; agent log:" >&2; cat "$WORK/agent.log" >&2; exit 1; }
	sleep 0.2
done
say monolith agent-client --conf agent.conf --cmd_type hb
hb

# 6. The eval data through the server, and on the checkpoint.
say monolith predict --config fm.yaml --server 127.0.0.1:$GRPC --model_name planted:planted --out served.jsonl
"$BIN" predict --config "$WORK/fm.yaml" --server "127.0.0.1:$GRPC" --model_name planted:planted --out "$WORK/served.jsonl" "${TLS[@]}"
say monolith predict --config fm.yaml --out local.jsonl
"$BIN" predict --config "$WORK/fm.yaml" --out "$WORK/local.jsonl"
say monolith evaluate --config fm.yaml
"$BIN" evaluate --config "$WORK/fm.yaml" | tee "$WORK/evaluate.json"
EVAL=$(ls "$WORK"/data/eval/* | head -n 1)
say monolith agent-client --conf agent.conf --cmd_type predict --model_name planted:planted --input_type data --input_file data/eval/$(basename "$EVAL") --batch_size 8
"$BIN" agent-client --conf "$WORK/agent.conf" --cmd_type predict --model_name planted:planted --input_type data --input_file "$EVAL" --batch_size 8 "${TLS[@]}" | tee "$WORK/agent-predict.txt"
if [[ -n "${DEMO_KEEP:-}" ]]; then
	cp "$WORK/served.jsonl" "$WORK/local.jsonl" "$WORK/evaluate.json" "$WORK/agent-predict.txt" "$DEMO_KEEP/"
fi

# 7. SIGTERM: the agent stops its `monolith serve` and leaves ZooKeeper.
kill -TERM "$AGENT"
timeout 60 tail --pid="$AGENT" -f /dev/null || { echo "the agent did not stop within 60 s after SIGTERM" >&2; exit 1; }
wait "$AGENT"
echo
echo "agent stopped (exit 0)"

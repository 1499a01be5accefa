// Package agent is the serving agent (spec §1.1–1.2, §1.11, §1.13): the AgentService gRPC
// server answering HeartBeat, GetReplicas and GetResource for v1, v2 and v3 agents, the
// unified v3 agent (V3) and the v1 agent supervising its TF Serving processes (V1).
//
// Departures from the reference, each pinned by a test:
//   - AgentService binds 127.0.0.1 unless told otherwise (the reference binds every
//     interface); the entry TF Serving on the same host dials localhost.
//   - GetReplicas on a v3 agent answers gRPC UNIMPLEMENTED with a "not implemented"
//     message (the reference raised NotImplementedError, which clients saw as UNKNOWN).
//   - dc_aware HeartBeat merges the replicas of one task from several data centres, each
//     address once (S8; the reference let the last data centre overwrite the others).
//   - After writing TF Serving's model config file, V3 also sends it as a
//     HandleReloadConfigRequest, so a layout change applies at once rather than at TF
//     Serving's next 60 s poll of the file (the file is still written, and wins on a
//     failed request); after a layout change the available-model sync runs every second
//     until every accepted sub-graph is bound (at most two minutes), then every 30 s.
//   - V1 and V3 stop on SIGTERM by returning from Run (the CLI exits with status 0)
//     instead of killing themselves with SIGKILL, and so does V1 when one of its TF Serving
//     processes exits (after stopping the others); the ZooKeeper session is closed, so the
//     ephemeral nodes disappear at once rather than after the session timeout.
//   - TF Serving is always MONOLITH_TFS_BINARY (S11), for V1 too (the reference's v1 ran
//     {TFS_HOME}/bin/tensorflow_model_server); without it the agent does not start.
//   - V1's process logs ({kind}_{tfs_log}) are appended to, as the reference's
//     ServingLog does, also under MLP_POD_NAME (where the reference left stdout alone).
//   - The agents wait at most zk.DefaultConnectTimeout (15 s, kazoo's start timeout) for
//     a first ZooKeeper session, then fail.
package agent

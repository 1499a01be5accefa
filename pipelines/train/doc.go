// Package train is the batch training pipeline: it trains an LR, FM or DeepFM model
// (kernels/model) over fused embedding layouts against a sharded parameter server, evaluates
// it on held-out data, and reports one summary (monolith train).
//
// # Pipeline
//
// Each epoch is one Beam pipeline composed from public transforms (TrainPipeline): the
// reshuffled file names → transforms/beamio.ReadFiles → the config's filters and label ops
// (transforms/filter, transforms/label) → transforms/shard → Lookup (PS: embeddings,
// creating absent fids, and the dense parameters) → transforms/layout.Layout →
// transforms/model.ForwardBackward → layout.LayoutGrad → transforms/aggregate.AggregateGrads
// → Apply (PS). Lookup and Apply are this package's exported steps; each step is a
// transform a user can recompose. A runner fuses them into one stage: batches pass in
// memory with their state (element.TrainState) and never cross a shuffle. The same steps
// also run as a plain Go loop (Options.Loop), which the benchmark suite compares.
//
// Updates are asynchronous, as in Monolith's async training: workers never wait for each
// other, and the ordered pools of the read, shard and PS steps overlap neighbouring
// batches, so a batch may be looked up before the previous one is applied. The global step
// is a counter on PS shard 0 (the GlobalStep RPC), taken once per applied batch; max_steps
// stops the workers once it is passed. Per-worker state (the PS client, kernel buffers,
// model instances) lives in the DoFns' Setup.
//
// # Retries
//
// Every batch has an id derived from the run, the epoch and the batch's content. Its
// GlobalStep and ApplyGradients requests carry ids derived from it, and the PS skips ids it
// has already applied (a bounded window), so a bundle that a runner retries does not apply
// its gradients twice. Retried batches are recomputed against the current parameters; only
// their duplicate applies are dropped.
//
// # Dense parameters
//
// The model's dense parameters are PS tables too ("dense_<param>", one row per fid
// 0..Rows-1), looked up with every batch and updated by ApplyGradients with the dense
// optimizer, like the embeddings.
//
// # Control
//
// With a model directory (checkpoint.dir) the driver serves the training controller
// (package controller; monolith ctl). Its barrier lives on PS shard 0: each bundle in
// progress joins it at StartBundle and leaves at FinishBundle, learns of a placed barrier
// from the GlobalStep response of its last step, and pauses at its next step boundary after
// collecting the apply in flight. The driver also polls every shard's HealthCheck (30 s);
// an unhealthy PS places the barrier with controller.ActionStop, the workers stop, and Run
// returns ErrPSUnhealthy with Monolith's report.
//
// # Checkpoints and evaluation
//
// The driver asks the PS to save every checkpoint.every_steps global steps and once at
// the end. Evaluation runs one more pipeline over the held-out files (after training, and
// after every eval_every_epochs-th epoch): lookups do not create fids, and the predictions
// and labels (8 bytes per row) are combined for exact AUC and log loss (transforms/model
// Evaluate), which reach the driver as Beam metrics; the training figures do as counters.
//
// # Workers, discovery and the chief
//
// A job can run as several worker processes (runner.index of runner.num_workers; monolith
// cluster starts them): worker i trains the input files k with k % num_workers == i, and
// the workers find the PS shards through the discovery runner.discovery_type selects
// (ps/discovery: static ps.addrs, zk, consul, tf_config, mlp). A worker waits, bounded,
// until every shard is registered and answers, then polls the membership (Follow) and
// hands changes to its client's SetShards. Worker 0 is the chief: it alone removes a
// stale barrier, serves the controller, takes the periodic checkpoints, writes the event
// file, and, once every worker has met the end barrier on PS shard 0 (bounded by
// runner.chief_timeout_secs), saves and evaluates. Every config key acts or is refused
// by name: runner fields that do not act here are errors unless left at their defaults.
//
// # Evaluate and predict
//
// Evaluate and Predict restore a checkpoint of the model directory (Restore) into
// in-process shards that do not save, after checking it against the model's tables,
// widths and shard count before any data is read, and run the evaluation's transforms
// (PredictPipeline adds the rows' line ids and writes them with their predictions).
//
// # Summaries and metrics
//
// With a model directory the driver writes TensorBoard scalar summaries into an event file
// there (io/tfevents, Monolith's write_summary): every runner.save_summary_steps global
// steps (default 100) the mean log loss and examples/s since the last summary, the
// streaming AUC of every row trained so far (Monolith's host-call auc) and the global
// step, and at every evaluation eval/auc and eval/logloss (with the planted data's
// eval/bayes_auc and eval/bayes_logloss). The driver polls the global step on PS shard 0,
// so a summary is labelled with the step it saw, a few steps after the multiple.
//
// Metrics (Options.Registry; monolith train --metrics-listen) count the steps, examples
// and loss the workers apply, their PS calls (ps/client), the controller's RPCs, saves and
// barrier, and the in-process shards' server metrics. Workers reach the run's Metrics
// through the context Beam passes to Setup, so only workers in the driver's process count
// (the embedded runner and LOOPBACK); the loss and AUC of the summaries come from them too.
// Workers in other processes dial the PS themselves and report through Beam's counters.
package train

// Package optimizer holds the per-segment update rules of Monolith's embedding tables
// (spec/ps.md §3): SGD, Adagrad, FTRL, Adadelta, Adam, AMSGrad, Momentum, MovingAverage,
// RMSProp v1/v2, GroupAdaGrad and BatchSoftmax, with their state layouts and dumps.
//
// New builds an Optimizer from Monolith's OptimizerConfig. An Optimizer is immutable and
// holds only hyper-parameters; the caller owns every weight, gradient and state slice, so a
// table can keep all entries in contiguous arrays. Step, Init, Dump and Restore may run
// concurrently on distinct state slices. Step never allocates and makes no interface call
// per element; it panics if a slice is shorter than Dim() or StateLen() (an invariant
// violation), and never writes past those lengths.
//
// # State layout
//
// State is float32 words per entry, in this order (d = Dim()):
//
//	kind            StateLen  words                                      Init
//	sgd             0         —                                          —
//	adagrad         d         norm[d]                                    initial_accumulator_value
//	ftrl            2d        norm[d], zero[d]                           initial_accumulator_value, 0
//	adadelta        2d        accum[d], accum_update[d]                  0, 0
//	adam            2d+2      m[d], v[d], beta1_power, beta2_power       0, 0, β1, β2
//	amsgrad         3d+2      m[d], v[d], vhat[d], beta1_power, beta2_power  0, 0, 0, β1, β2
//	momentum        d         n[d]                                       0
//	moving_average  0         —                                          —
//	rmsprop         d         n[d]                                       0
//	rmspropv2       d         n[d]                                       0
//	group_adagrad   1         G (sum of per-step max g'²)                initial_accumulator_value
//	batch_softmax   2         last global step, int64 bit-cast: low word first  0
//
// This is Monolith's layout too. Dump writes Monolith's SingleOptimizerDump (field
// contents as Monolith's Save: FTRL zero and norm, Adam m, v and both powers, and so on);
// sgd dumps an empty SgdOptimizerDump element and moving_average dumps nothing (nil).
// Restore checks the dump's kind, the length of every repeated field and the presence of
// every scalar, and names the optimizer and field in its error (Monolith reads out of
// range instead).
//
// # Arithmetic
//
// The rules follow spec/ps.md §3.3 in float32, operation by operation in Monolith's order,
// except RMSProp v1/v2, which compute in float64 and store float32 with Monolith's exact
// intermediate roundings. Go may fuse a multiply and an add into one FMA on some targets,
// which changes the last bit of some results; the tests allow for that.
//
// Learning rates: Step uses its lr argument (MovingAverage ignores it). LearningRate(step)
// is the default a caller uses when a request carries none: the configured learning_rate,
// ramped linearly from 0 over warmup_steps when that is positive (§3.4). Monolith computes
// this schedule in Python; rmsprop, rmspropv2 and batch_softmax have no warmup field and
// moving_average has no learning rate (LearningRate returns 0).
//
// # Divergences from Monolith
//
// Decision P3 (spec/decisions.md) fixes the reference's quirks; each has a test pinning the
// correct value:
//
//   - Adagrad uses g' = g + wd·w in both the accumulator and the weight update for every
//     element. Monolith's AVX path updates each full block of 8 weights with the raw g
//     (the two agree when weight_decay_factor is 0).
//   - FTRL's L1 term uses sign(zero) = ±1: w = α·(sign(z)·λ1 − z)/(√n + β + λ2·α), the
//     FTRL-Proximal solution. Monolith uses signbit(zero) ∈ {0, 1} (same result when l1 is
//     0).
//   - Adam's Restore writes beta1_power and beta2_power into their own slots. Monolith
//     writes both into the beta1_power slot and leaves beta2_power at its Init value.
//   - RMSProp v1 uses the per-call learning rate like every other rule. Monolith uses the
//     configured learning_rate, so schedules had no effect; with the per-call rate equal to
//     the configured one the results are identical.
//
// The stochastic_rounding_float16 decorator fixes two more:
//
//   - It passes the global step through to the wrapped rule (Monolith passes 0, which
//     breaks batch_softmax).
//   - It rounds only the Dim() weights of its own segment. Monolith rounds from the
//     segment's start to the end of the entry, so later segments' weights are rounded too,
//     before their own step.
//
// It also replaces Monolith's per-thread multiply-with-carry generator by a hash of the
// weight's bits, the global step and the element index (deterministic and lock-free), and
// saturates finite weights beyond ±65504 to ±65504; Monolith turns weights below −65504
// into −Inf and, rarely, weights above 65504 into +Inf.
//
// Two inputs that break Monolith are defined here:
//
//   - GroupAdaGrad with ‖z‖ = 0 (for example a zero weight and gradient with l2 = 0) sets
//     the weights to 0, the limit of the update; Monolith computes 0/0 and stores NaN.
//   - BatchSoftmax with a negative global step leaves the weight and state unchanged;
//     Monolith aborts the process.
//
// dynamic_wd_adagrad, group_ftrl and dc are "not implemented" errors, as in Monolith's
// open-source build.
package optimizer

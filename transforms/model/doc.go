// Package model holds the Beam transforms of a model over layout tensors (kernels/model:
// LR, FM, DeepFM, and models users register): the forward and backward pass of a training
// step, predictions for evaluation, and the evaluation's exact AUC and log loss.
//
// # Behavior
//
// ForwardBackward reads, for every *element.Sharded, the layout outputs (Tensors, from
// layout.Layout), the labels (the first value of the batch's "__label__" column per row)
// and the dense parameters of its training state (element.TrainState.Params, from a
// lookup), computes the logits, the summed sigmoid cross-entropy and the gradients, and
// emits the element with Tensors replaced by the gradients of the layout outputs (zeros
// for outputs the model does not read), ready for layout.LayoutGrad, and with
// TrainState.ParamGrads, Rows, Loss, Preds and Labels set. Predict emits Scores (probabilities and
// labels) per batch; Evaluate gathers every batch's Scores and reports the AUC (ties count
// half) and the log loss as Beam metrics, which the driver reads from the pipeline's
// result (EvalResult).
//
// # Models
//
// A model is chosen by name from a Registry (DefaultModels: lr, fm, deepfm). A user adds
// a model by registering a constructor in an init function of their program (Register),
// so that every worker of the pipeline, built from the same binary, finds it by name.
//
// # Parallelism and determinism
//
// ForwardBackward and Predict run on Parallelism goroutines per bundle (default
// GOMAXPROCS), each with its own model instance, and emit in input order: the outputs of
// a batch depend only on the batch and its parameters.
package model

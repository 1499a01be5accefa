// Package tfs runs, watches and imitates TensorFlow Serving for the serving agent
// (spec/serving-and-control.md §1.8, §1.12, §1.13, §1.18; decisions S4, S11, S15).
// Wrapper supervises a tensorflow_model_server child, Monitor is a gRPC client of its
// ModelService and PredictionService, and Fake is an in-process TF Serving double.
//
// # Wrapper
//
// NewWrapperFromEnv takes the binary from MONOLITH_TFS_BINARY. Like the reference, which
// joins the binary and the flags and splits the line on whitespace, the value may hold
// leading arguments: "/bin/monolith fake-tfserving" runs the Fake as the TF Serving
// binary. Unset (or blank), it fails with ErrNoBinary, whose text is the one decision S11
// and spec §4 give: "TF Serving binary not available: set MONOLITH_TFS_BINARY" (no
// package prefix, so that the message is exactly that). The child's stdout and stderr go to
// a log file (truncated at start, as the reference does) or, line by line, to slog. Stop
// sends SIGTERM and kills the child after Options.StopTimeout; the end of the context given
// to Start does the same.
//
// # Monitor
//
// Monitor wraps the raw RPCs (GetModelStatus, GetModelMetadata, HandleReloadConfigRequest)
// with errors naming the address and the model, and adds the aggregation of §1.12: the
// status of a model is its newest AVAILABLE version, else its newest version; an RPC error
// becomes UNKNOWN carrying the gRPC code and message, and an empty list becomes UNKNOWN
// with NOT_FOUND (S11). Both use version -1, the reference fake's "no version". gRPC and
// TensorFlow error codes share their numbers, so codes are copied as they are.
//
// # Fake
//
// Fake serves the real API on 127.0.0.1 and behaves like tensorflow_model_server, not like
// the reference's mocked_tfserving.py (S15):
//
//   - The model config is a text-format ModelServerConfig, read from a file at start (an
//     unreadable file fails NewFake, as it stops TF Serving) and again every
//     ConfigPollWait when that is positive, or set by HandleReloadConfigRequest. Only
//     model_config_list is supported; names must be unique and non-empty, base paths
//     non-empty, platforms "" or "tensorflow". Errors of a reload are answered in the
//     response status with gRPC OK, as TF Serving does; a bad file on a re-read is logged
//     and the previous config kept.
//   - Versions are the numeric sub-directories of a model's base_path (symbolic links
//     followed, "7" and "007" one version), scanned at each config and every
//     FileSystemPollWait when that is positive. The version policy picks
//     among them: latest N (N < 1 means 1; the default policy is latest 1), all, or the
//     specific versions that exist. latest_once cannot be expressed here (S4).
//   - Each version walks START → LOADING → AVAILABLE, one state per Step; a version no
//     longer wanted walks UNLOADING → END. An AVAILABLE version is unloaded only when no
//     wanted version of its model is still loading (TF Serving's availability-preserving
//     policy). END versions stay listed, as TF Serving's state monitor keeps them; a
//     version wanted again starts over at START. Reloads return at once; states move on
//     the Step clock (the reference's crashes and busy loop are gone, and it never adds
//     versions on its own).
//   - GetModelStatus lists every version of a model in version order, or the one asked by
//     version or label; an unknown model, version or label is a gRPC NOT_FOUND error, as
//     in TF Serving. GetModelMetadata accepts only the field "signature_def", resolves the
//     version (asked, labelled or newest AVAILABLE; otherwise NOT_FOUND) and returns the
//     resolved ModelSpec with an empty SignatureDefMap (the fake loads no SavedModel).
//
// Everything here is safe for concurrent use.
package tfs

// Package schemas is the home of monolith-go's data schemas: the protobuf sources under
// proto/ (Monolith's wire-compatible messages, written for this project), the generated Go
// packages (examplepb, matrixpb, parserpb, hashtablepb, pspb; agentpb for the serving agent;
// tfservingpb and tfcorepb for the subset of TF Serving's API the agent speaks), the Arrow
// batch layout (batch) and the Avro row schema (avsc). Regenerate the Go code with
// `make proto`.
package schemas

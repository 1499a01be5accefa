// Package schemas is the home of monolith-go's data schemas: the protobuf sources under
// proto/ (Monolith's wire-compatible messages, written for this project), the generated Go
// packages (examplepb, matrixpb, parserpb, hashtablepb), the Arrow batch layout (batch)
// and the Avro row schema (avsc). Regenerate the Go code with `make proto`.
package schemas

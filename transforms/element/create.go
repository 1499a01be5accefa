package element

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.Function2x1(decodeEmit)
	register.Emitter1[arrow.RecordBatch]()
}

// Create returns a PCollection of the given record batches, for tests and small
// pipelines: beam.Create cannot take them directly, because it encodes its values by
// their concrete (unexported) Arrow type. The batches are encoded once at construction
// and decoded by a DoFn; each output is a fresh copy in Go memory.
func Create(s beam.Scope, recs ...arrow.RecordBatch) beam.PCollection {
	s = s.Scope("element.Create")
	enc := make([][]byte, len(recs))
	for i, r := range recs {
		b, err := EncodeRecord(r)
		if err != nil {
			panic(fmt.Errorf("element.Create: batch %d: %w", i, err))
		}
		enc[i] = b
	}
	if len(enc) == 0 {
		return beam.ParDo(s, decodeEmit, beam.CreateList(s, [][]byte{}))
	}
	return beam.ParDo(s, decodeEmit, beam.CreateList(s, enc))
}

func decodeEmit(b []byte, emit func(arrow.RecordBatch)) error {
	rec, err := DecodeRecord(b)
	if err != nil {
		return err
	}
	emit(rec)
	return nil
}

package avro

import (
	"math"
	"slices"

	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/batch"
)

// Rows are decoded with the primitives of ocf.Decoder, whose errors wrap ErrFormat and name
// the row (see ocfConfig).

// readArray decodes an Avro array whose items take at least minSize bytes each. Block counts are
// checked against the bytes left before anything is allocated. An empty array is nil.
func readArray[T any](d *ocf.Decoder, minSize int, item func(*ocf.Decoder) T) []T {
	var out []T
	for {
		n := d.Count("", minSize)
		if n == 0 {
			break
		}
		out = slices.Grow(out, n) // amortized: many one-item blocks stay linear
		for range n {
			out = append(out, item(d))
		}
	}
	if d.Err() != nil {
		return nil
	}
	return out
}

func long(d *ocf.Decoder) int64              { return d.Long() }
func fid(d *ocf.Decoder) uint64              { return uint64(d.Long()) } // bit-cast, see avsc.Row
func int32Item(d *ocf.Decoder) int32         { return d.Int() }
func bytesItem(d *ocf.Decoder) []byte        { return d.Bytes() }
func fids(d *ocf.Decoder) []uint64           { return readArray(d, 1, fid) }
func floats(d *ocf.Decoder) batch.Float32s   { return d.Floats("", nil) }
func doubles(d *ocf.Decoder) batch.Float64s  { return d.Doubles("", nil) }
func longs(d *ocf.Decoder) []int64           { return readArray(d, 1, long) }
func bytesList(d *ocf.Decoder) [][]byte      { return readArray(d, 1, bytesItem) }
func cellItem(d *ocf.Decoder) (c batch.Cell) { readCell(d, &c); return c }

// readCell decodes a Cell record (field order of avsc.Row).
func readCell(d *ocf.Decoder, c *batch.Cell) {
	c.Name = string(d.Bytes())
	k := d.Int()
	if k < 0 || k > math.MaxUint8 {
		d.Fail("cell kind %d", k)
	}
	c.Kind = batch.Kind(k)
	c.Fids = fids(d)
	c.Floats = floats(d)
	c.Doubles = doubles(d)
	c.Int64s = longs(d)
	c.Bytes = bytesList(d)
	c.FidLists = readArray(d, 1, fids)
	c.FloatLists = readArray(d, 1, floats)
	c.DoubleLists = readArray(d, 1, doubles)
	c.Int64Lists = readArray(d, 1, longs)
	c.BytesLists = readArray(d, 1, bytesList)
}

// readRow decodes one Row record (field order of avsc.Row).
func readRow(d *ocf.Decoder) (batch.Row, error) {
	var r batch.Row
	if d.Union("") {
		r.BatchSchema = d.Bytes()
	}
	n := d.Long()
	if n < 0 || n > math.MaxInt32 {
		d.Fail("batch_rows %d", n)
	}
	r.BatchRows = int(n)
	r.Features = readArray(d, 12, cellItem) // a cell takes at least 12 bytes
	if d.Union("") {
		r.Label = floats(d)
		if r.Label == nil {
			r.Label = batch.Float32s{}
		}
	}
	if d.Union("") {
		v := d.Float()
		r.InstanceWeight = &v
	}
	if d.Union("") {
		r.LineID = d.Bytes()
	}
	if d.Union("") {
		v := d.Long()
		if v < 0 || v > math.MaxUint32 {
			d.Fail("data_source_key %d out of the uint32 range", v)
		}
		u := uint32(v)
		r.DataSourceKey = &u
	}
	if d.Union("") {
		r.Extra = d.Bytes()
	}
	if d.Union("") {
		r.FidOrder = readArray(d, 1, int32Item)
		if r.FidOrder == nil {
			r.FidOrder = []int32{}
		}
	}
	if err := d.Err(); err != nil {
		return batch.Row{}, err
	}
	return r, nil
}

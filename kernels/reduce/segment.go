package reduce

import (
	"fmt"
	"math"
	"slices"
)

// checkRowIDs validates the row id of every value against rows.
func checkRowIDs(rowIDs []int64, rows int) error {
	for i, r := range rowIDs {
		if r < 0 || r >= int64(rows) {
			return fmt.Errorf("%w: id_indices[%d] = %d not in [0, %d) rows", ErrRange, i, r, rows)
		}
	}
	return nil
}

// checkReduce validates a reduce op: dst rows×dim, values len(rowIDs)×dim.
func checkReduce(dstWhat string, dstLen int, valWhat string, valLen int, rowIDs []int64, rows, dim int) error {
	if err := checkMatrix(dstWhat, dstLen, rows, dim); err != nil {
		return err
	}
	if err := checkMatrix(valWhat, valLen, len(rowIDs), dim); err != nil {
		return err
	}
	return checkRowIDs(rowIDs, rows)
}

// ReduceSum sums the value rows (len(rowIDs)×dim) into the output rows (dst,
// rows×dim, zeroed by the op): row rowIDs[i] += values row i, in i order
// (Monolith's reduce_sum; rowIDs is column 0 of its id_indices, rows its id_length).
// Rows without values stay 0. A row id outside [0, rows) is an [ErrRange] error.
// This is also the CPU form of fused_sorted_segment_sum, one call per list.
func ReduceSum(dst []float32, rowIDs []int64, values []float32, rows, dim int) error {
	if err := checkReduce("dst", len(dst), "values", len(values), rowIDs, rows, dim); err != nil {
		return err
	}
	clear(dst)
	for i, r := range rowIDs {
		o := int(r) * dim
		addTo(dst[o:o+dim], values[i*dim:i*dim+dim])
	}
	return nil
}

// ReduceSumGrad is the gradient of [ReduceSum]: dst row i (len(rowIDs)×dim) is
// grad row rowIDs[i] (grad is rows×dim).
func ReduceSumGrad(dst []float32, rowIDs []int64, grad []float32, rows, dim int) error {
	if err := checkReduce("grad", len(grad), "dst", len(dst), rowIDs, rows, dim); err != nil {
		return err
	}
	for i, r := range rowIDs {
		o := int(r) * dim
		copy(dst[i*dim:i*dim+dim], grad[o:o+dim])
	}
	return nil
}

// rowCounts counts the values of each row. It allocates rows int32s.
func rowCounts(rowIDs []int64, rows int) []int32 {
	c := make([]int32, rows)
	for _, r := range rowIDs {
		c[r]++
	}
	return c
}

// ReduceMean is [ReduceSum] divided by each row's value count (Monolith's
// reduce_mean, which multiplies by the float32 reciprocal 1/count, as here). Following
// D9 a row without values is 0, not NaN (Monolith computes 0×∞).
// It allocates one int32 per output row.
func ReduceMean(dst []float32, rowIDs []int64, values []float32, rows, dim int) error {
	if err := ReduceSum(dst, rowIDs, values, rows, dim); err != nil {
		return err
	}
	if dim == 0 || len(rowIDs) == 0 {
		return nil
	}
	counts := rowCounts(rowIDs, rows)
	for r, c := range counts {
		if c > 1 {
			inv := float32(1 / float64(c))
			row := dst[r*dim : r*dim+dim]
			for j := range row {
				row[j] *= inv
			}
		}
	}
	return nil
}

// ReduceMeanGrad is the gradient of [ReduceMean]: dst row i is grad row rowIDs[i]
// times 1/count(rowIDs[i]). Following D9 the counter has one entry per output row
// (Monolith sizes it by dim, which indexes out of bounds for row ids ≥ dim).
// It allocates one int32 per output row.
func ReduceMeanGrad(dst []float32, rowIDs []int64, grad []float32, rows, dim int) error {
	if err := ReduceSumGrad(dst, rowIDs, grad, rows, dim); err != nil {
		return err
	}
	if dim == 0 || len(rowIDs) == 0 {
		return nil
	}
	counts := rowCounts(rowIDs, rows)
	for i, r := range rowIDs {
		if c := counts[r]; c > 1 {
			inv := float32(1 / float64(c))
			row := dst[i*dim : i*dim+dim]
			for j := range row {
				row[j] *= inv
			}
		}
	}
	return nil
}

// ReduceSqrtn writes the elementwise square norm of each row's values into dst:
// dst[r][j] = sqrt(Σ_{i: rowIDs[i]=r} values[i][j]²) (Monolith's reduce_sqrtn,
// MonolithReduceSquareNorm; not a division by sqrt(count)). Rows without values are 0.
func ReduceSqrtn(dst []float32, rowIDs []int64, values []float32, rows, dim int) error {
	if err := checkReduce("dst", len(dst), "values", len(values), rowIDs, rows, dim); err != nil {
		return err
	}
	clear(dst)
	for i, r := range rowIDs {
		o := int(r) * dim
		addSquaresTo(dst[o:o+dim], values[i*dim:i*dim+dim])
	}
	for j, v := range dst {
		dst[j] = float32(math.Sqrt(float64(v)))
	}
	return nil
}

// ReduceSqrtnGrad is the gradient of [ReduceSqrtn]: dst[i][j] = grad[r][j]·x/y with
// r = rowIDs[i], x = values[i][j] and y = the forward output [r][j], or 0 where y is 0.
// It recomputes y as Monolith does, allocating rows×dim floats.
func ReduceSqrtnGrad(dst []float32, rowIDs []int64, values, grad []float32, rows, dim int) error {
	if err := checkReduce("grad", len(grad), "values", len(values), rowIDs, rows, dim); err != nil {
		return err
	}
	if err := checkMatrix("dst", len(dst), len(rowIDs), dim); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	y := make([]float32, len(grad))
	if err := ReduceSqrtn(y, rowIDs, values, rows, dim); err != nil {
		return err
	}
	for i, r := range rowIDs {
		o := int(r) * dim
		yr, gr := y[o:o+dim], grad[o:o+dim]
		x, out := values[i*dim:i*dim+dim], dst[i*dim:i*dim+dim]
		for j := range out {
			var m float32
			if yr[j] != 0 {
				m = x[j] / yr[j]
			}
			out[j] = gr[j] * m
		}
	}
	return nil
}

// checkSplitDims validates split dims and returns their sum.
func checkSplitDims(splitDims []int) (int, error) {
	if err := checkDims("split_dims", splitDims); err != nil {
		return 0, err
	}
	sum := 0
	for _, d := range splitDims {
		if sum > math.MaxInt-d {
			return 0, fmt.Errorf("%w: split_dims sum overflows", ErrRange)
		}
		sum += d
	}
	return sum, nil
}

// FusedReduceSumAndSplit sums value rows (len(rowIDs)×Σ splitDims) per output row like
// [ReduceSum] and splits the columns: dst[m] (rows×splitDims[m], zeroed by the op)
// receives columns [Σ_{k<m} splitDims[k], +splitDims[m]) (Monolith's
// fused_reduce_sum_and_split). Rows without values are 0.
func FusedReduceSumAndSplit(dst [][]float32, rowIDs []int64, values []float32, rows int, splitDims []int) error {
	width, err := checkSplitDims(splitDims)
	if err != nil {
		return err
	}
	if len(dst) != len(splitDims) {
		return fmt.Errorf("%w: %d outputs for %d split dims", ErrShape, len(dst), len(splitDims))
	}
	for m, d := range splitDims {
		if err := checkMatrix(fmt.Sprintf("dst[%d]", m), len(dst[m]), rows, d); err != nil {
			return err
		}
	}
	if err := checkMatrix("values", len(values), len(rowIDs), width); err != nil {
		return err
	}
	if err := checkRowIDs(rowIDs, rows); err != nil {
		return err
	}
	for _, d := range dst {
		clear(d)
	}
	for i, r := range rowIDs {
		row := values[i*width : i*width+width]
		c := 0
		for m, d := range splitDims {
			o := int(r) * d
			addTo(dst[m][o:o+d], row[c:c+d])
			c += d
		}
	}
	return nil
}

// FusedReduceSumAndSplitGrad is the gradient of [FusedReduceSumAndSplit]: dst row i
// (len(rowIDs)×Σ splitDims) is the concatenation over m of grads[m] row rowIDs[i]
// (grads[m] is rows×splitDims[m]).
func FusedReduceSumAndSplitGrad(dst []float32, rowIDs []int64, grads [][]float32, rows int, splitDims []int) error {
	width, err := checkSplitDims(splitDims)
	if err != nil {
		return err
	}
	if len(grads) != len(splitDims) {
		return fmt.Errorf("%w: %d grads for %d split dims", ErrShape, len(grads), len(splitDims))
	}
	for m, d := range splitDims {
		if err := checkMatrix(fmt.Sprintf("grads[%d]", m), len(grads[m]), rows, d); err != nil {
			return err
		}
	}
	if err := checkMatrix("dst", len(dst), len(rowIDs), width); err != nil {
		return err
	}
	if err := checkRowIDs(rowIDs, rows); err != nil {
		return err
	}
	for i, r := range rowIDs {
		out := dst[i*width : i*width+width]
		c := 0
		for m, d := range splitDims {
			o := int(r) * d
			copy(out[c:c+d], grads[m][o:o+d])
			c += d
		}
	}
	return nil
}

// SegmentSum sums contiguous segments of value rows: dst row r (len(rowSplits)-1 rows
// of dim, fully overwritten) = Σ values rows [rowSplits[r], rowSplits[r+1]), in order.
// It is the pooling of a ragged embedding batch (the CPU form of Monolith's GPU
// fused_reduce_and_split_gpu before its column split; split the columns with
// [FusedReduceSumAndSplit] semantics or slice dst). rowSplits must be valid for
// len(values)/dim rows.
func SegmentSum(dst []float32, rowSplits []int64, values []float32, dim int) error {
	n, err := checkSegments(rowSplits, len(values), len(dst), dim)
	if err != nil {
		return err
	}
	clear(dst)
	for r := 0; r < n; r++ {
		out := dst[r*dim : r*dim+dim]
		for i := rowSplits[r]; i < rowSplits[r+1]; i++ {
			addTo(out, values[int(i)*dim:int(i)*dim+dim])
		}
	}
	return nil
}

// SegmentSumGrad is the gradient of [SegmentSum]: every value row of segment r
// (dst, rowSplits[last]×dim) is a copy of grad row r.
func SegmentSumGrad(dst []float32, rowSplits []int64, grad []float32, dim int) error {
	n, err := checkSegments(rowSplits, len(dst), len(grad), dim)
	if err != nil {
		return err
	}
	for r := 0; r < n; r++ {
		g := grad[r*dim : r*dim+dim]
		for i := rowSplits[r]; i < rowSplits[r+1]; i++ {
			copy(dst[int(i)*dim:int(i)*dim+dim], g)
		}
	}
	return nil
}

// checkSegments validates SegmentSum shapes and returns the number of segments.
func checkSegments(rowSplits []int64, valLen, outLen, dim int) (int, error) {
	if dim < 0 {
		return 0, fmt.Errorf("%w: dim %d is negative", ErrRange, dim)
	}
	if len(rowSplits) == 0 {
		return 0, fmt.Errorf("%w: row splits are empty (need at least [0])", ErrShape)
	}
	vrows := int(rowSplits[len(rowSplits)-1])
	if err := checkMatrix("values", valLen, vrows, dim); err != nil {
		return 0, err
	}
	if err := checkSplits("segment", rowSplits, vrows); err != nil {
		return 0, err
	}
	n := len(rowSplits) - 1
	if err := checkMatrix("segment sums", outLen, n, dim); err != nil {
		return 0, err
	}
	return n, nil
}

// NormalizeMergedSplit merges R = len(sizes) row-split vectors concatenated in
// rowSplit (vector k has sizes[k] entries) into one, appended to dst: the first
// vector is kept as is; every later vector drops its leading entry and is shifted by
// the running total (the sum of the previous vectors' last entries). The result has
// len(rowSplit) − R + 1 entries. Example: [0,2,5,5,9, 0,0,3,4] with sizes [5,4]
// gives [0,2,5,5,9,9,12,13]. Every size must be ≥ 1 and the sizes must sum to
// len(rowSplit); R = 0 (an empty merge) gives [0].
func NormalizeMergedSplit(dst []int64, rowSplit []int64, sizes []int32) ([]int64, error) {
	sum := 0
	for k, s := range sizes {
		if s < 1 {
			return dst, fmt.Errorf("%w: row_split_size[%d] = %d, every row split has at least one entry", ErrRange, k, s)
		}
		sum += int(s)
	}
	if sum != len(rowSplit) {
		return dst, fmt.Errorf("%w: row_split_size sums to %d but row_split has %d entries", ErrShape, sum, len(rowSplit))
	}
	if len(sizes) == 0 {
		return append(dst, 0), nil
	}
	dst = slices.Grow(dst, len(rowSplit)-len(sizes)+1)
	var pre int64
	off := 0
	for k, s := range sizes {
		first := off
		if k > 0 {
			first++
		}
		for _, v := range rowSplit[first : off+int(s)] {
			dst = append(dst, pre+v)
		}
		off += int(s)
		pre += rowSplit[off-1]
	}
	return dst, nil
}

// ValueRowIDs appends to dst the row id of every value of a ragged tensor with the
// given row splits (Monolith's fused_value_rowids, RaggedTensor.value_rowids): row r
// contributes rowSplits[r+1]-rowSplits[r] copies of r. rowSplits must start at 0
// and be non-decreasing.
func ValueRowIDs(dst []int64, rowSplits []int64) ([]int64, error) {
	if len(rowSplits) == 0 {
		return dst, fmt.Errorf("%w: row splits are empty (need at least [0])", ErrShape)
	}
	last := rowSplits[len(rowSplits)-1]
	if last < 0 || last > MaxIndexLen {
		return dst, fmt.Errorf("%w: row splits end at %d", ErrRange, last)
	}
	if err := checkSplits("value", rowSplits, int(last)); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, int(last))
	for r := 0; r+1 < len(rowSplits); r++ {
		for i := rowSplits[r]; i < rowSplits[r+1]; i++ {
			dst = append(dst, int64(r))
		}
	}
	return dst, nil
}

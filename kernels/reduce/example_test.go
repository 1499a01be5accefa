package reduce_test

import (
	"fmt"

	"github.com/monolith-go/monolith/kernels/reduce"
)

// A parameter-server push: sum the grad rows of repeated fids before sending them.
func ExampleAggregateGrads() {
	var agg reduce.Aggregated[uint64] // reuse across steps: no allocation once warm
	fids := []uint64{7, 3, 7}
	grads := []float32{1, 1, 2, 2, 10, 10} // one row of dim 2 per occurrence
	if err := reduce.AggregateGrads(&agg, fids, grads, 2); err != nil {
		panic(err)
	}
	for u, fid := range agg.IDs {
		fmt.Println(fid, agg.Row(u), agg.Counts[u])
	}
	// Output:
	// 7 [11 11] 2
	// 3 [2 2] 1
}

// The last case of Monolith's distribution_ops_fused_test: two merged slots, three
// shards, embedding dims 3 and 2.
func ExampleFusedReorderByIndices() {
	var r reduce.FusedReorder[int64]
	inputs := [][]int64{{2, 3, 1, 2, 7, 2}, {5, 8, 4, 4, 5, 11, 6}}
	if err := reduce.FusedReorderByIndices(&r, inputs, 3, []int{3, 2}, reduce.MonolithRank0Empty(3)); err != nil {
		panic(err)
	}
	fmt.Println(r.Output, r.ShardSizes, r.ShardedSlotSizes)
	fmt.Println(r.FusedEmbOffset)
	// Output:
	// [3 6 1 7 4 2 5 8 11] [2 3 4] [1 1 2 1 1 3]
	// [13 0 5 13 8 13 16 18 11 11 16 20 3]
}

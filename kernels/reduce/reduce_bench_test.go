package reduce

// go test -run '^$' -bench . -benchmem -count 6 ./kernels/reduce | tee new.txt   (compare with benchstat)
//
// Each kernel benchmark has a memcpy baseline of the same byte count (SetBytes) in
// BenchmarkMemcpy, so MB/s ratios read directly as "times a plain copy".

import (
	"math/rand/v2"
	"testing"
)

const (
	aggIDs   = 1 << 20 // grad rows pushed
	aggDim   = 16
	gathIDs  = 100_000 // gather_embeddings_by_input benchmark (a) of Monolith
	gathIn   = 4 * gathIDs
	gathDim  = 32
	reoLists = 128 // distribution_ops_fused_test.test_benchmark
	reoLen   = 10240
	reoS     = 8
	reoDim   = 16
)

func aggBytes() int64  { return int64(aggIDs) * (8 + 4*aggDim) }
func gathBytes() int64 { return int64(gathIn) * (8 + 8 + 4*gathDim) }
func reoBytes() int64  { return int64(reoLists*reoLen) * 8 }

// aggInput is a PS push where every id occurs twice (distributed_ps_benchmark):
// aggIDs/2 distinct uint64 fids with random high bits, shuffled.
func aggInput() ([]uint64, []float32) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]uint64, aggIDs)
	for i := 0; i < aggIDs/2; i++ {
		f := rng.Uint64() >> 1
		ids[2*i], ids[2*i+1] = f, f
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	grads := make([]float32, aggIDs*aggDim)
	for i := range grads {
		grads[i] = 0.3
	}
	return ids, grads
}

func BenchmarkAggregateGrads(b *testing.B) {
	ids, grads := aggInput()
	var a Aggregated[uint64]
	_ = AggregateGrads(&a, ids, grads, aggDim) // warm up: steady state allocates nothing
	b.SetBytes(aggBytes())
	b.ReportAllocs()
	for b.Loop() {
		if err := AggregateGrads(&a, ids, grads, aggDim); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(aggIDs)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

func BenchmarkAggregateGradsRagged(b *testing.B) {
	ids, grads := aggInput()
	dims := make([]int, len(ids))
	for i := range dims {
		dims[i] = aggDim
	}
	var a Aggregated[uint64]
	_ = AggregateGradsRagged(&a, ids, grads, dims)
	b.SetBytes(aggBytes())
	b.ReportAllocs()
	for b.Loop() {
		if err := AggregateGradsRagged(&a, ids, grads, dims); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(aggIDs)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

func gatherInput() (ids []int64, emb []float32, input []int64) {
	ids = make([]int64, gathIDs)
	for i := range ids {
		ids[i] = int64(i)
	}
	emb = make([]float32, gathIDs*gathDim)
	for i := range emb {
		emb[i] = 1
	}
	input = make([]int64, gathIn) // row x holds ids x..x+3 mod N
	for x := 0; x < gathIDs; x++ {
		for k := 0; k < 4; k++ {
			input[4*x+k] = int64((x + k) % gathIDs)
		}
	}
	return ids, emb, input
}

// BenchmarkGatherEmbeddingsByInput includes building the id index, as Monolith's op
// does on every call.
func BenchmarkGatherEmbeddingsByInput(b *testing.B) {
	ids, emb, input := gatherInput()
	out := make([]float32, gathIn*gathDim)
	mapping := make([]int64, gathIn)
	var idx Index[int64]
	_ = idx.Build(ids)
	b.SetBytes(gathBytes())
	b.ReportAllocs()
	for b.Loop() {
		if err := idx.Build(ids); err != nil {
			b.Fatal(err)
		}
		if err := GatherEmbeddingsByInput(out, mapping, &idx, emb, gathDim, input); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(gathIn)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

func BenchmarkFusedReorderByIndices(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := make([][]int64, reoLists)
	dims := make([]int, reoLists)
	for m := range inputs {
		inputs[m] = make([]int64, reoLen)
		for i := range inputs[m] {
			inputs[m][i] = rng.Int64N(1 << 31)
		}
		dims[m] = reoDim
	}
	var dst FusedReorder[int64]
	_ = FusedReorderByIndices(&dst, inputs, reoS, dims, MonolithRank0Empty(reoS))
	b.SetBytes(reoBytes())
	b.ReportAllocs()
	for b.Loop() {
		if err := FusedReorderByIndices(&dst, inputs, reoS, dims, MonolithRank0Empty(reoS)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(reoLists*reoLen)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkMemcpy copies as many bytes as each kernel benchmark declares.
func BenchmarkMemcpy(b *testing.B) {
	for _, c := range []struct {
		name  string
		bytes int64
	}{{"AggregateGrads", aggBytes()}, {"GatherEmbeddingsByInput", gathBytes()}, {"FusedReorderByIndices", reoBytes()}} {
		b.Run(c.name, func(b *testing.B) {
			src := make([]byte, c.bytes)
			dst := make([]byte, c.bytes)
			for i := range src {
				src[i] = byte(i)
			}
			b.SetBytes(c.bytes)
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// Package vecf32 holds the element-wise float32 loops the layout kernels spend their time
// in: dst += src and dst += src / d. On amd64 with AVX2 they run eight lanes at a time; each
// lane performs exactly the scalar IEEE operation, so results are bit-identical to the Go
// loops (no fused multiply-add, no reassociation). Elsewhere the Go loops run.
package vecf32

// Add adds src into dst element-wise; len(src) must be at least len(dst).
func Add(dst, src []float32) {
	src = src[:len(dst)]
	if useAVX2 && len(dst) >= 8 {
		addAVX2(&dst[0], &src[0], len(dst))
		return
	}
	for k := range dst {
		dst[k] += src[k]
	}
}

// AddDiv adds src[k] / d into dst[k] element-wise (each quotient rounded, then added);
// len(src) must be at least len(dst).
func AddDiv(dst, src []float32, d float32) {
	src = src[:len(dst)]
	if useAVX2 && len(dst) >= 8 {
		addDivAVX2(&dst[0], &src[0], len(dst), d)
		return
	}
	for k := range dst {
		dst[k] += src[k] / d
	}
}

package reduce

// addTo adds src into dst elementwise (dst[i] += src[i]) for i < len(src).
// dst must be at least as long as src. Unrolled by four; the order of the
// additions per element is the call order, so results are deterministic.
func addTo(dst, src []float32) {
	dst = dst[:len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s := src[i : i+4 : i+4]
		d := dst[i : i+4 : i+4]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
	}
	for ; i < len(src); i++ {
		dst[i] += src[i]
	}
}

// addScaledTo adds scale*src into dst elementwise.
func addScaledTo(dst, src []float32, scale float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] += v * scale
	}
}

// addSquaresTo adds src[i]² into dst[i].
func addSquaresTo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] += v * v
	}
}

package vecf32

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// addAVX2 adds n floats of src into dst (n ≥ 8).
//
//go:noescape
func addAVX2(dst, src *float32, n int)

// addDivAVX2 adds src[k]/d into dst[k] for n floats (n ≥ 8).
//
//go:noescape
func addDivAVX2(dst, src *float32, n int, d float32)

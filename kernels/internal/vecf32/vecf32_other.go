//go:build !amd64

package vecf32

const useAVX2 = false

func addAVX2(dst, src *float32, n int)               { panic("unreachable") }
func addDivAVX2(dst, src *float32, n int, d float32) { panic("unreachable") }

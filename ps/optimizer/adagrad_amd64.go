package optimizer

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// adagradAVX2 is Adagrad's element loop over n floats, n a multiple of 8.
//
//go:noescape
func adagradAVX2(w, grad, norm *float32, n int, lr, wd float32)

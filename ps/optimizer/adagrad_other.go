//go:build !amd64

package optimizer

const useAVX2 = false

func adagradAVX2(w, grad, norm *float32, n int, lr, wd float32) { panic("unreachable") }

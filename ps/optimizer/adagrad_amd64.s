#include "textflag.h"

// func adagradAVX2(w, grad, norm *float32, n int, lr, wd float32)
// n is a multiple of 8. Per lane, in Go's order and rounding (no fused multiply-add):
// gi = g + wd·w; norm += gi·gi; w -= (lr / sqrt(norm)) · gi.
TEXT ·adagradAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ norm+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS lr+32(FP), Y7
	VBROADCASTSS wd+36(FP), Y8
loop:
	CMPQ CX, $0
	JLE done
	VMOVUPS (DI), Y0           // w
	VMULPS Y0, Y8, Y3          // wd·w
	VADDPS (SI), Y3, Y3        // gi = g + wd·w
	VMULPS Y3, Y3, Y4          // gi·gi
	VADDPS (DX), Y4, Y4        // norm + gi·gi
	VMOVUPS Y4, (DX)
	VSQRTPS Y4, Y5
	VDIVPS Y5, Y7, Y6          // lr / sqrt(norm)
	VMULPS Y3, Y6, Y6          // · gi
	VSUBPS Y6, Y0, Y0          // w − …
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JMP loop
done:
	VZEROUPPER
	RET

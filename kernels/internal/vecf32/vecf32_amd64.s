#include "textflag.h"

// func addAVX2(dst, src *float32, n int)
// Eight lanes per step; the last (overlapping) step covers the tail: lanes already done
// are recomputed from their original values, kept in Y2, so no element is added twice.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ -32(DI)(CX*4), R8     // dst + 4n - 32: the last full vector
	LEAQ -32(SI)(CX*4), R9
	VMOVUPS (R8), Y2           // the last vector's original dst values
	VMOVUPS (R9), Y3
	SUBQ $8, CX                // elements before the last vector
loop:
	CMPQ CX, $0
	JLE tail
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP loop
tail:
	// Lanes of the last vector that the loop already wrote hold updated values; recompute
	// the whole vector from the originals saved before the loop.
	VADDPS Y3, Y2, Y2
	VMOVUPS Y2, (R8)
	VZEROUPPER
	RET

// func addDivAVX2(dst, src *float32, n int, d float32)
TEXT ·addDivAVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS d+24(FP), Y4
	LEAQ -32(DI)(CX*4), R8
	LEAQ -32(SI)(CX*4), R9
	VMOVUPS (R8), Y2
	VMOVUPS (R9), Y3
	SUBQ $8, CX
dloop:
	CMPQ CX, $0
	JLE dtail
	VMOVUPS (SI), Y1
	VDIVPS Y4, Y1, Y1
	VADDPS (DI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP dloop
dtail:
	VDIVPS Y4, Y3, Y3
	VADDPS Y3, Y2, Y2
	VMOVUPS Y2, (R8)
	VZEROUPPER
	RET

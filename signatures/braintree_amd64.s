#include "textflag.h"

// SPLAT fills both halves of X with the eight bytes of c.
#define SPLAT(c, X) MOVQ c, DX; MOVQ DX, X; PUNPCKLQDQ X, X

// func braintreeAlnumBlocks(s []byte) int
//
// The length of the longest prefix of s made of whole 16-byte blocks in which every byte is
// an ASCII letter, a digit or "/". SSE2 only, which every amd64 processor has. Signed byte
// compares leave bytes of 0x80 and above out of every range.
TEXT ·braintreeAlnumBlocks(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), CX
	XORQ AX, AX

	SPLAT($0x2020202020202020, X8)  // 0x20: folds A-Z onto a-z
	SPLAT($0x6060606060606060, X9)  // 'a'-1
	SPLAT($0x7b7b7b7b7b7b7b7b, X10) // 'z'+1
	SPLAT($0x2e2e2e2e2e2e2e2e, X11) // '/'-1
	SPLAT($0x3a3a3a3a3a3a3a3a, X12) // '9'+1

loop:
	LEAQ 16(AX), DX
	CMPQ DX, CX
	JA   done
	MOVOU (SI)(AX*1), X0
	MOVO  X0, X1
	POR   X8, X1     // y = x | 0x20
	MOVO  X1, X2
	PCMPGTB X9, X2   // y > 'a'-1
	MOVO  X10, X3
	PCMPGTB X1, X3   // 'z'+1 > y
	PAND  X3, X2     // letters
	MOVO  X0, X4
	PCMPGTB X11, X4  // x > '/'-1
	MOVO  X12, X5
	PCMPGTB X0, X5   // '9'+1 > x
	PAND  X5, X4     // digits and "/"
	POR   X4, X2
	PMOVMSKB X2, BX
	CMPL  BX, $0xffff
	JNE   done
	MOVQ  DX, AX
	JMP   loop

done:
	MOVQ AX, ret+24(FP)
	RET

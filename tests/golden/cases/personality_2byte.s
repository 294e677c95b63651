# .cfi_personality/.cfi_lsda with the 2-byte pointer encodings (udata2 0x02, sdata2 0x0a,
# pcrel|udata2 0x12, pcrel|sdata2 0x1a). In a .o their relocations are R_X86_64_16/PC16, which
# readelf cannot apply ("Warning: unable to apply unsupported reloc type 12"): only stdout is
# compared. Object file only (a link would overflow the 16-bit fields).
	.text

	.globl	two_byte_0
	.type	two_byte_0, @function
two_byte_0:					# 0x02
	.cfi_startproc
	.cfi_personality 0x02, personality_routine
	.cfi_lsda 0x02, lsda
	ret
	.cfi_endproc
	.size	two_byte_0, .-two_byte_0

	.globl	two_byte_1
	.type	two_byte_1, @function
two_byte_1:					# 0x0a
	.cfi_startproc
	.cfi_personality 0x0a, personality_routine
	.cfi_lsda 0x0a, lsda
	ret
	.cfi_endproc
	.size	two_byte_1, .-two_byte_1

	.globl	two_byte_2
	.type	two_byte_2, @function
two_byte_2:					# 0x12
	.cfi_startproc
	.cfi_personality 0x12, personality_routine
	.cfi_lsda 0x12, lsda
	ret
	.cfi_endproc
	.size	two_byte_2, .-two_byte_2

	.globl	two_byte_3
	.type	two_byte_3, @function
two_byte_3:					# 0x1a
	.cfi_startproc
	.cfi_personality 0x1a, personality_routine
	.cfi_lsda 0x1a, lsda
	ret
	.cfi_endproc
	.size	two_byte_3, .-two_byte_3

personality_routine:
	ret
	.section	.gcc_except_table,"a",@progbits
lsda:
	.byte	0xff, 0xff, 0x01, 0x00
	.section	.note.GNU-stack,"",@progbits

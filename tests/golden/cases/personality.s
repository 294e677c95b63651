# .cfi_personality and .cfi_lsda with every pointer encoding GNU as accepts on x86-64 except the
# 2-byte ones (personality_2byte.s), one function each, so each gets its own "zPLR" CIE
# (augmentation data: personality encoding, personality pointer, LSDA encoding, FDE encoding)
# and an FDE whose augmentation data is the LSDA pointer. Pointer encodings: LSB gABI
# "DWARF Exception Header Encoding" (DW_EH_PE_*). In a .o readelf applies the relocations to
# .eh_frame before printing the augmentation bytes. Also: a personality without LSDA ("zPR"),
# an LSDA without personality ("zLR"), and the personality-only CIE shared by two FDEs.
	.text

	.globl	with_personality_0
	.type	with_personality_0, @function
with_personality_0:				# 0x9b: indirect | pcrel | sdata4: gcc's choice for -fPIC code (through DW.ref.personality)
	.cfi_startproc
	.cfi_personality 0x9b, DW.ref.personality_routine
	.cfi_lsda 0x9b, lsda_0
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_0, .-with_personality_0

	.globl	with_personality_1
	.type	with_personality_1, @function
with_personality_1:				# 0x1b: pcrel | sdata4
	.cfi_startproc
	.cfi_personality 0x1b, personality_routine
	.cfi_lsda 0x1b, lsda_1
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_1, .-with_personality_1

	.globl	with_personality_2
	.type	with_personality_2, @function
with_personality_2:				# 0x03: udata4, absolute
	.cfi_startproc
	.cfi_personality 0x03, personality_routine
	.cfi_lsda 0x03, lsda_2
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_2, .-with_personality_2

	.globl	with_personality_3
	.type	with_personality_3, @function
with_personality_3:				# 0x00: absptr, 8 bytes
	.cfi_startproc
	.cfi_personality 0x00, personality_routine
	.cfi_lsda 0x00, lsda_3
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_3, .-with_personality_3

	.globl	with_personality_4
	.type	with_personality_4, @function
with_personality_4:				# 0x0c: sdata8
	.cfi_startproc
	.cfi_personality 0x0c, personality_routine
	.cfi_lsda 0x0c, lsda_4
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_4, .-with_personality_4

	.globl	with_personality_5
	.type	with_personality_5, @function
with_personality_5:				# 0x04: udata8
	.cfi_startproc
	.cfi_personality 0x04, personality_routine
	.cfi_lsda 0x04, lsda_5
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_5, .-with_personality_5

	.globl	with_personality_6
	.type	with_personality_6, @function
with_personality_6:				# 0x0b: sdata4
	.cfi_startproc
	.cfi_personality 0x0b, personality_routine
	.cfi_lsda 0x0b, lsda_6
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_6, .-with_personality_6

	.globl	with_personality_7
	.type	with_personality_7, @function
with_personality_7:				# 0x1c: pcrel | sdata8
	.cfi_startproc
	.cfi_personality 0x1c, personality_routine
	.cfi_lsda 0x1c, lsda_7
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_7, .-with_personality_7

	.globl	with_personality_8
	.type	with_personality_8, @function
with_personality_8:				# 0x10: pcrel | absptr
	.cfi_startproc
	.cfi_personality 0x10, personality_routine
	.cfi_lsda 0x10, lsda_8
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_8, .-with_personality_8

	.globl	with_personality_9
	.type	with_personality_9, @function
with_personality_9:				# 0x80: indirect | absptr
	.cfi_startproc
	.cfi_personality 0x80, DW.ref.personality_routine
	.cfi_lsda 0x80, lsda_9
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_9, .-with_personality_9

	.globl	with_personality_10
	.type	with_personality_10, @function
with_personality_10:				# 0x8b: indirect | sdata4
	.cfi_startproc
	.cfi_personality 0x8b, DW.ref.personality_routine
	.cfi_lsda 0x8b, lsda_10
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_10, .-with_personality_10

	.globl	with_personality_11
	.type	with_personality_11, @function
with_personality_11:				# 0x13: pcrel | udata4
	.cfi_startproc
	.cfi_personality 0x13, personality_routine
	.cfi_lsda 0x13, lsda_11
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	with_personality_11, .-with_personality_11

	.globl	personality_only_a
	.type	personality_only_a, @function
personality_only_a:				# "zPR": no LSDA
	.cfi_startproc
	.cfi_personality 0x9b, DW.ref.personality_routine
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	personality_only_a, .-personality_only_a

	.globl	personality_only_b
	.type	personality_only_b, @function
personality_only_b:				# shares personality_only_a's CIE
	.cfi_startproc
	.cfi_personality 0x9b, DW.ref.personality_routine
	ret
	.cfi_endproc
	.size	personality_only_b, .-personality_only_b

	.globl	lsda_only
	.type	lsda_only, @function
lsda_only:					# "zLR": an LSDA without personality
	.cfi_startproc
	.cfi_lsda 0x1b, lsda_0
	ret
	.cfi_endproc
	.size	lsda_only, .-lsda_only

	.globl	omitted
	.type	omitted, @function
omitted:					# DW_EH_PE_omit (0xff) for both: a plain "zR" CIE
	.cfi_startproc
	.cfi_personality 0xff
	.cfi_lsda 0xff
	ret
	.cfi_endproc
	.size	omitted, .-omitted

	.globl	personality_routine
	.type	personality_routine, @function
personality_routine:
	xorl	%eax, %eax
	ret
	.size	personality_routine, .-personality_routine

	.section	.data.rel.local.DW.ref.personality_routine,"awG",@progbits,DW.ref.personality_routine,comdat
	.align	8
	.hidden	DW.ref.personality_routine
	.weak	DW.ref.personality_routine
	.type	DW.ref.personality_routine, @object
	.size	DW.ref.personality_routine, 8
DW.ref.personality_routine:
	.quad	personality_routine

	.section	.gcc_except_table,"a",@progbits
lsda_0:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_1:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_2:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_3:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_4:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_5:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_6:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_7:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_8:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_9:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_10:
	.byte	0xff, 0xff, 0x01, 0x00
lsda_11:
	.byte	0xff, 0xff, 0x01, 0x00
	.section	.note.GNU-stack,"",@progbits

# The same functions described in both .eh_frame and .debug_frame (.cfi_sections .eh_frame,
# .debug_frame): readelf dumps .eh_frame first, then .debug_frame; the two differ in CIE
# augmentation ("zR" vs ""), CIE id (0 vs 0xffffffff) and pointer encoding.
	.cfi_sections .eh_frame, .debug_frame
	.text
	.globl	alpha
	.type	alpha, @function
alpha:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	call	beta
	popq	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	alpha, .-alpha

	.globl	beta
	.type	beta, @function
beta:
	.cfi_startproc
	.cfi_personality 0x1b, personality_routine	# only .eh_frame carries augmentations
	.cfi_lsda 0x1b, lsda
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register rbp
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	beta, .-beta

	.globl	personality_routine
	.type	personality_routine, @function
personality_routine:
	ret
	.size	personality_routine, .-personality_routine

	.section	.gcc_except_table,"a",@progbits
lsda:
	.byte	0xff, 0xff, 0x01, 0x00
	.section	.note.GNU-stack,"",@progbits

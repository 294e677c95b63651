# CFI in .debug_frame only (.cfi_sections .debug_frame), as gcc emits it for
# -fno-asynchronous-unwind-tables -g: version-1 CIEs with no augmentation, CIE pointers that are
# section offsets (DWARF 5 section 6.4.1) rather than eh_frame's self-relative ones, absolute
# 8-byte initial locations that readelf relocates in a .o, and nested remember/restore state.
	.cfi_sections .debug_frame
	.text
	.globl	first
	.type	first, @function
first:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register rbp
	.cfi_remember_state
	leave
	.cfi_def_cfa rsp, 8
	.cfi_restore rbp
	ret
	.cfi_restore_state
	.skip	300, 0x90
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	first, .-first

	.section	.text.second,"ax",@progbits
	.globl	second
	.type	second, @function
second:						# in another section: a second relocation target
	.cfi_startproc
	subq	$24, %rsp
	.cfi_def_cfa_offset 32
	.cfi_escape 0x2e, 0x08			# DW_CFA_GNU_args_size in .debug_frame
	addq	$24, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	second, .-second

	.text
	.globl	third
	.type	third, @function
third:
	.cfi_startproc simple
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -8
	ret
	.cfi_endproc
	.size	third, .-third
	.section	.note.GNU-stack,"",@progbits

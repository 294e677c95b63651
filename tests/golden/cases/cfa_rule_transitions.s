# Moving between the two kinds of CFA rule (DWARF 5 section 6.4.2.2). DW_CFA_def_cfa_register,
# DW_CFA_def_cfa_offset and DW_CFA_def_cfa_offset_sf are "valid only if the current CFA rule is
# defined to use a register and offset", but real code uses them after DW_CFA_def_cfa_expression,
# and libgcc's unwinder (unwind-dw2.c: def_cfa_register sets the register and how, keeps the
# offset; def_cfa_offset: "cfa_how deliberately not set"), gdb (dwarf2/frame.c) and readelf agree:
#   * DW_CFA_def_cfa_register after an expression: register + the offset in force BEFORE the
#     expression (libgcrypt 1.10 does exactly this: rsp+56, expression, then rsp again, rsp+56);
#   * DW_CFA_def_cfa_offset(_sf) while the CFA is an expression: the CFA stays the expression,
#     the offset is remembered for a later DW_CFA_def_cfa_register.
	.text
	.globl	libgcrypt_pattern
	.type	libgcrypt_pattern, @function
libgcrypt_pattern:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	subq	$40, %rsp
	.cfi_def_cfa_offset 56
	movq	%rsp, %rax
	.cfi_def_cfa_register rax		# rax+56
	nop
	# DW_CFA_def_cfa_expression: DW_OP_breg7 536; DW_OP_deref; DW_OP_plus_uconst 56
	.cfi_escape 0x0f, 0x06, 0x77, 0x98, 0x04, 0x06, 0x23, 0x38
	nop
	.cfi_def_cfa_register rsp		# rsp+56: the offset from before the expression
	addq	$40, %rsp
	.cfi_def_cfa_offset 16
	popq	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	libgcrypt_pattern, .-libgcrypt_pattern

	.globl	offset_while_expression
	.type	offset_while_expression, @function
offset_while_expression:
	.cfi_startproc
	nop
	.cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06	# CFA = [rsp + 8]
	nop
	.cfi_escape 0x0e, 0x20			# DW_CFA_def_cfa_offset 32: CFA still the expression
	nop
	.cfi_escape 0x13, 0x7c			# DW_CFA_def_cfa_offset_sf -4 * -8 = 32 again
	nop
	.cfi_remember_state
	.cfi_def_cfa_register rbp		# rbp+32
	nop
	.cfi_restore_state			# the expression again, offset 32 still remembered
	nop
	.cfi_def_cfa_register rsp		# rsp+32
	nop
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	offset_while_expression, .-offset_while_expression
	.section	.note.GNU-stack,"",@progbits

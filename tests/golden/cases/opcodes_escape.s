# The DW_CFA opcodes GNU as has no directive for, written with .cfi_escape, plus the
# directive-able ones in their other encodings (a register < 64 in the _extended forms,
# negative factored operands, multi-byte LEB128 operands, an explicit DW_CFA_nop mid-program).
# Byte reference: DWARF 5 section 7.24 table 7.29; GNU extensions from binutils include/dwarf2.def.
# Register numbers (System V AMD64 ABI fig. 3.36): rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5,
# rbp 6, rsp 7, r8..r15 8..15, return address 16.

	.text
	.globl	escaped_rules
	.type	escaped_rules, @function
escaped_rules:
	.cfi_startproc
	pushq	%rbp
	.cfi_escape 0x13, 0x7e			# DW_CFA_def_cfa_offset_sf: -2 * -8 = 16
	.cfi_escape 0x05, 0x06, 0x02		# DW_CFA_offset_extended: rbp at cfa-16
	pushq	%rbx
	.cfi_escape 0x13, 0x80, 0x7f		# DW_CFA_def_cfa_offset_sf, two-byte SLEB128 -128 -> 1024
	.cfi_escape 0x11, 0x03, 0x03		# DW_CFA_offset_extended_sf: rbx at cfa-24
	.cfi_escape 0x00			# DW_CFA_nop in the middle of a program
	pushq	%r12
	.cfi_escape 0x12, 0x07, 0x7c		# DW_CFA_def_cfa_sf: rsp, -4 * -8 = 32
	.cfi_escape 0x2f, 0x0c, 0x04		# DW_CFA_GNU_negative_offset_extended: r12 at cfa-32
	.cfi_escape 0x2e, 0x10			# DW_CFA_GNU_args_size 16
	nop
	.cfi_escape 0x14, 0x0d, 0x05		# DW_CFA_val_offset: r13 = cfa-40
	.cfi_escape 0x15, 0x0e, 0x7f		# DW_CFA_val_offset_sf: r14 = cfa+8
	.cfi_escape 0x15, 0x0f, 0x02		# DW_CFA_val_offset_sf, negative: r15 = cfa-16
	.cfi_escape 0x2e, 0x80, 0x01		# DW_CFA_GNU_args_size 128 (two-byte ULEB128)
	nop
	.cfi_escape 0x06, 0x06			# DW_CFA_restore_extended on a register < 64
	.cfi_escape 0x07, 0x0d			# DW_CFA_undefined r13
	.cfi_escape 0x08, 0x0e			# DW_CFA_same_value r14
	.cfi_escape 0x09, 0x0f, 0x07		# DW_CFA_register: r15 in rsp
	.cfi_escape 0x2e, 0x00			# DW_CFA_GNU_args_size 0
	nop
	.cfi_def_cfa rsp, 100000		# DW_CFA_def_cfa, three-byte ULEB128 offset
	nop
	.cfi_escape 0x0c, 0x07, 0x20		# DW_CFA_def_cfa by hand: rsp+32
	popq	%r12
	.cfi_escape 0x0e, 0x18			# DW_CFA_def_cfa_offset 24
	.cfi_escape 0xcc			# DW_CFA_restore r12 (0xc0 | 12)
	popq	%rbx
	.cfi_escape 0x0e, 0x10
	.cfi_escape 0xc3			# DW_CFA_restore rbx
	popq	%rbp
	.cfi_escape 0x0e, 0x08
	.cfi_escape 0x06, 0x06			# DW_CFA_restore_extended rbp
	ret
	.cfi_endproc
	.size	escaped_rules, .-escaped_rules

	.globl	expression_rules
	.type	expression_rules, @function
expression_rules:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	# DW_CFA_expression: rbx saved at [rsp + 0] (DW_OP_breg7 0)
	.cfi_escape 0x10, 0x03, 0x02, 0x77, 0x00
	# DW_CFA_val_expression: rbp = rsp + 16 (DW_OP_breg7 16)
	.cfi_escape 0x16, 0x06, 0x02, 0x77, 0x10
	nop
	# DW_CFA_def_cfa_expression: CFA = [rsp + 8] + 8 (DW_OP_breg7 8; DW_OP_deref; DW_OP_plus_uconst 8)
	.cfi_escape 0x0f, 0x05, 0x77, 0x08, 0x06, 0x23, 0x08
	nop
	.cfi_remember_state			# an expression CFA in the saved state
	.cfi_def_cfa rbp, 32			# back to register+offset (the other transitions out
	nop					# of an expression CFA: cfa_rule_transitions.s)
	.cfi_restore_state			# the expression CFA again
	nop
	# DW_CFA_def_cfa_expression with a two-byte ULEB128 length (130): DW_OP_breg7 8, 128 x DW_OP_nop
	.cfi_escape 0x0f, 0x82, 0x01, 0x77, 0x08
	.rept	128
	.cfi_escape 0x96
	.endr
	nop
	.cfi_def_cfa rsp, 16
	# DW_CFA_expression on the return address column
	.cfi_escape 0x10, 0x10, 0x02, 0x77, 0x08
	# DW_CFA_val_expression with a register operand beyond 63 (mxcsr, 64 = 0x40)
	.cfi_escape 0x16, 0x40, 0x01, 0x30
	nop
	.cfi_restore rbx
	.cfi_restore rbp
	.cfi_restore rip
	.cfi_restore 64
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	expression_rules, .-expression_rules
	.section	.note.GNU-stack,"",@progbits

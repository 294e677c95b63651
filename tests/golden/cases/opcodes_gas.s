# Every DW_CFA opcode that GNU as 2.40 emits from a plain .cfi_* directive on x86-64.
# The .skip sizes pick the advance encoding: <64 bytes gives DW_CFA_advance_loc, <256
# DW_CFA_advance_loc1, <65536 DW_CFA_advance_loc2, else DW_CFA_advance_loc4.
# Data alignment is -8, so a positive save offset needs DW_CFA_offset_extended_sf and a
# negative val_offset factors to a positive number (DW_CFA_val_offset) and vice versa.
# Registers >= 64 (mxcsr = 64, fcw = 65) do not fit DW_CFA_offset's 6-bit operand.

	.text
	.globl	advances
	.type	advances, @function
advances:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16			# DW_CFA_advance_loc + DW_CFA_def_cfa_offset
	.cfi_offset rbp, -16			# DW_CFA_offset
	.skip	100, 0x90
	.cfi_def_cfa_offset 24			# DW_CFA_advance_loc1
	.skip	1000, 0x90
	.cfi_def_cfa_offset 32			# DW_CFA_advance_loc2
	.skip	70000, 0x90
	.cfi_def_cfa_offset 16			# DW_CFA_advance_loc4
	popq	%rbp
	.cfi_restore rbp			# DW_CFA_restore
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	advances, .-advances

	.globl	registers_and_rules
	.type	registers_and_rules, @function
registers_and_rules:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8		# DW_CFA_def_cfa_offset via the adjusting form
	.cfi_rel_offset rbp, 0			# DW_CFA_offset computed from the current CFA offset
	movq	%rsp, %rbp
	.cfi_def_cfa_register rbp		# DW_CFA_def_cfa_register
	pushq	%rbx
	.cfi_offset rbx, 16			# DW_CFA_offset_extended_sf (positive offset)
	.cfi_offset 64, -32			# DW_CFA_offset_extended (mxcsr)
	.cfi_offset 65, 8			# DW_CFA_offset_extended_sf on a register >= 64 (fcw)
	nop
	.cfi_val_offset r12, -24		# DW_CFA_val_offset
	.cfi_val_offset r13, 24			# DW_CFA_val_offset_sf
	nop
	.cfi_undefined r14			# DW_CFA_undefined
	.cfi_same_value r15			# DW_CFA_same_value
	.cfi_register rip, rdi			# DW_CFA_register (return address held in rdi, like vfork)
	.cfi_register r12, rax
	nop
	.cfi_restore 64				# DW_CFA_restore_extended
	.cfi_restore 65
	.cfi_def_cfa rsp, 24			# DW_CFA_def_cfa
	nop
	.cfi_def_cfa rsp, -8			# DW_CFA_def_cfa_sf (negative offset)
	nop
	.cfi_def_cfa r11, 0
	.cfi_undefined rip			# end of stack, as in clone/_start
	ret
	.cfi_endproc
	.size	registers_and_rules, .-registers_and_rules

	.globl	nested_state
	.type	nested_state, @function
nested_state:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	.cfi_remember_state			# DW_CFA_remember_state, depth 1
	pushq	%rbp
	.cfi_def_cfa_offset 24
	.cfi_offset rbp, -24
	.cfi_remember_state			# depth 2
	pushq	%r12
	.cfi_def_cfa_offset 32
	.cfi_offset r12, -32
	.cfi_remember_state			# depth 3
	popq	%r12
	.cfi_restore r12
	.cfi_def_cfa_offset 24
	ret
	.cfi_restore_state			# DW_CFA_restore_state, back to depth 2
	nop
	.cfi_restore_state			# depth 1
	nop
	.cfi_restore_state			# depth 0: the row after pushq %rbx
	popq	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	nested_state, .-nested_state

	.globl	simple_no_initial
	.type	simple_no_initial, @function
simple_no_initial:
	.cfi_startproc simple			# a CIE without the initial instructions
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -8
	nop
	.cfi_return_column rbx			# a second CIE, return address in column 3
	ret
	.cfi_endproc
	.size	simple_no_initial, .-simple_no_initial

	.globl	no_instructions
	.type	no_instructions, @function
no_instructions:
	.cfi_startproc				# an FDE with only DW_CFA_nop padding
	ret
	.cfi_endproc
	.size	no_instructions, .-no_instructions
	.section	.note.GNU-stack,"",@progbits

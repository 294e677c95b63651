# A signal trampoline like glibc's __restore_rt (sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c):
# .cfi_signal_frame makes the CIE augmentation "zRS"; the FDE starts one byte before the symbol
# (the nop), so a lookup at the trampoline's address minus one still lands in it; the CFA and
# every register are expressions over the ucontext_t that the kernel pushed at rsp
# (offsets from glibc's ucontext_i.sym: oR8 40 ... oRSP 160, oRIP 168).
	.text
	.cfi_startproc simple
	.cfi_signal_frame
	.cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06	# DW_CFA_def_cfa_expression: DW_OP_breg7 160; DW_OP_deref
	.cfi_escape 0x10, 0x08, 0x02, 0x77, 0x28		# DW_CFA_expression r8:  DW_OP_breg7 40
	.cfi_escape 0x10, 0x09, 0x02, 0x77, 0x30		# r9   48
	.cfi_escape 0x10, 0x0a, 0x02, 0x77, 0x38		# r10  56
	.cfi_escape 0x10, 0x0b, 0x03, 0x77, 0xc0, 0x00	# r11  64
	.cfi_escape 0x10, 0x0c, 0x03, 0x77, 0xc8, 0x00	# r12  72
	.cfi_escape 0x10, 0x0d, 0x03, 0x77, 0xd0, 0x00	# r13  80
	.cfi_escape 0x10, 0x0e, 0x03, 0x77, 0xd8, 0x00	# r14  88
	.cfi_escape 0x10, 0x0f, 0x03, 0x77, 0xe0, 0x00	# r15  96
	.cfi_escape 0x10, 0x05, 0x03, 0x77, 0xe8, 0x00	# rdi 104
	.cfi_escape 0x10, 0x04, 0x03, 0x77, 0xf0, 0x00	# rsi 112
	.cfi_escape 0x10, 0x06, 0x03, 0x77, 0xf8, 0x00	# rbp 120
	.cfi_escape 0x10, 0x03, 0x03, 0x77, 0x80, 0x01	# rbx 128
	.cfi_escape 0x10, 0x01, 0x03, 0x77, 0x88, 0x01	# rdx 136
	.cfi_escape 0x10, 0x00, 0x03, 0x77, 0x90, 0x01	# rax 144
	.cfi_escape 0x10, 0x02, 0x03, 0x77, 0x98, 0x01	# rcx 152
	.cfi_escape 0x10, 0x07, 0x03, 0x77, 0xa0, 0x01	# rsp 160
	.cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01	# rip 168
	nop
	.globl	restore_rt
	.type	restore_rt, @function
restore_rt:
	movq	$15, %rax			# __NR_rt_sigreturn
	syscall
	.cfi_endproc
	.size	restore_rt, .-restore_rt

	.globl	signal_frame_with_rules
	.type	signal_frame_with_rules, @function
signal_frame_with_rules:			# a second "zRS" FDE with ordinary rules
	.cfi_startproc
	.cfi_signal_frame
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	popq	%rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	signal_frame_with_rules, .-signal_frame_with_rules
	.section	.note.GNU-stack,"",@progbits

# A hand-written .eh_frame (no .cfi directives) for what the directives cannot produce
# (LSB "Exception Frames" / DWARF 5 section 6.4.1):
#   * FDE pointer encodings other than gas's pcrel|sdata4: absptr (0x00), udata4 (0x03),
#     udata8 (0x04), pcrel|sdata8 (0x1c), and a CIE with no augmentation at all (absptr implied);
#   * DW_CFA_set_loc, whose operand uses the FDE pointer encoding (relocated, so it is exact);
#   * CIE version 3 (return address column as ULEB128) and unusual alignment factors
#     (code 4, data -4) that scale DW_CFA_advance_loc and the offsets;
#   * DW_CFA_advance_loc4 written by hand, trailing DW_CFA_nop padding, a zero terminator.
	.text
	.globl	hand_a
	.type	hand_a, @function
hand_a:
	pushq	%rbp
	movq	%rsp, %rbp
	popq	%rbp
	ret
	.size	hand_a, .-hand_a
	.globl	hand_b
	.type	hand_b, @function
hand_b:
	subq	$40, %rsp
	nop
	addq	$40, %rsp
	ret
	.size	hand_b, .-hand_b
	.globl	hand_c
	.type	hand_c, @function
hand_c:
	.skip	32, 0x90
	ret
	.size	hand_c, .-hand_c
hand_end:

	.section	.eh_frame,"a",@unwind
# ---- CIE 1: version 1, "zR", FDE encoding absptr (0x00)
cie_absptr:
	.long	cie_absptr_end - cie_absptr_start	# length
cie_absptr_start:
	.long	0				# CIE id
	.byte	1				# version
	.asciz	"zR"
	.uleb128 1				# code alignment
	.sleb128 -8				# data alignment
	.byte	16				# return address column
	.uleb128 1				# augmentation data length
	.byte	0x00				# FDE encoding: DW_EH_PE_absptr
	.byte	0x0c, 0x07, 0x08		# DW_CFA_def_cfa rsp 8
	.byte	0x90, 0x01			# DW_CFA_offset rip cfa-8
	.balign	8, 0
cie_absptr_end:

fde_a:
	.long	fde_a_end - fde_a_start
fde_a_start:
	.long	fde_a_start - cie_absptr	# CIE pointer
	.quad	hand_a				# pc_begin (absptr)
	.quad	hand_b - hand_a			# pc_range
	.uleb128 0				# augmentation data length
	.byte	0x41				# DW_CFA_advance_loc 1
	.byte	0x0e, 0x10			# DW_CFA_def_cfa_offset 16
	.byte	0x86, 0x02			# DW_CFA_offset rbp cfa-16
	.byte	0x01				# DW_CFA_set_loc hand_a+4
	.quad	hand_a + 4
	.byte	0x0d, 0x06			# DW_CFA_def_cfa_register rbp
	.byte	0x01				# DW_CFA_set_loc hand_a+5
	.quad	hand_a + 5
	.byte	0x0c, 0x07, 0x08		# DW_CFA_def_cfa rsp 8
	.byte	0xc6				# DW_CFA_restore rbp
	.balign	8, 0
fde_a_end:

# ---- CIE 2: version 3, "zR", FDE encoding udata4 (0x03), code alignment 4, data alignment -4
cie_udata4:
	.long	cie_udata4_end - cie_udata4_start
cie_udata4_start:
	.long	0
	.byte	3				# version 3: return address column is ULEB128
	.asciz	"zR"
	.uleb128 4				# code alignment 4
	.sleb128 -4				# data alignment -4
	.uleb128 16
	.uleb128 1
	.byte	0x03				# DW_EH_PE_udata4
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x02			# DW_CFA_offset rip 2 * -4 = cfa-8
	.balign	4, 0
cie_udata4_end:

fde_b:
	.long	fde_b_end - fde_b_start
fde_b_start:
	.long	fde_b_start - cie_udata4
	.long	hand_b				# pc_begin (udata4)
	.long	hand_c - hand_b
	.uleb128 0
	.byte	0x41				# DW_CFA_advance_loc 1 * 4 = 4
	.byte	0x0e, 0x30			# DW_CFA_def_cfa_offset 48
	.byte	0x01				# DW_CFA_set_loc hand_b+5 (udata4)
	.long	hand_b + 5
	.byte	0x83, 0x04			# DW_CFA_offset rbx 4 * -4 = cfa-16
	.byte	0x04				# DW_CFA_advance_loc4 1 * 4
	.long	1
	.byte	0x0e, 0x08			# DW_CFA_def_cfa_offset 8
	.byte	0xc3				# DW_CFA_restore rbx
	.byte	0, 0				# DW_CFA_nop padding
	.balign	4, 0
fde_b_end:

# ---- CIE 3: "zR", FDE encoding pcrel|sdata8 (0x1c)
cie_pcrel8:
	.long	cie_pcrel8_end - cie_pcrel8_start
cie_pcrel8_start:
	.long	0
	.byte	1
	.asciz	"zR"
	.uleb128 1
	.sleb128 -8
	.byte	16
	.uleb128 1
	.byte	0x1c				# DW_EH_PE_pcrel | DW_EH_PE_sdata8
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_pcrel8_end:

fde_c:
	.long	fde_c_end - fde_c_start
fde_c_start:
	.long	fde_c_start - cie_pcrel8
	.quad	hand_c - .			# pc_begin (pcrel sdata8)
	.quad	hand_end - hand_c
	.uleb128 0
	.byte	0x01				# DW_CFA_set_loc hand_c+16 (pcrel sdata8)
	.quad	hand_c + 16 - .
	.byte	0x0e, 0x10
	.byte	0x02, 0x08			# DW_CFA_advance_loc1 8
	.byte	0x0e, 0x08
	.balign	8, 0
fde_c_end:

# ---- CIE 4: "zR", FDE encoding udata8 (0x04), and a second FDE for hand_a through it
cie_udata8:
	.long	cie_udata8_end - cie_udata8_start
cie_udata8_start:
	.long	0
	.byte	1
	.asciz	"zR"
	.uleb128 1
	.sleb128 -8
	.byte	16
	.uleb128 1
	.byte	0x04				# DW_EH_PE_udata8
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_udata8_end:

fde_d:
	.long	fde_d_end - fde_d_start
fde_d_start:
	.long	fde_d_start - cie_udata8
	.quad	hand_a
	.quad	1
	.uleb128 0
	.balign	8, 0
fde_d_end:

# ---- CIE 5: version 1 with an empty augmentation string: pointers are absptr, no "z" data
cie_plain:
	.long	cie_plain_end - cie_plain_start
cie_plain_start:
	.long	0
	.byte	1
	.asciz	""
	.uleb128 1
	.sleb128 -8
	.byte	16
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_plain_end:

fde_e:
	.long	fde_e_end - fde_e_start
fde_e_start:
	.long	fde_e_start - cie_plain
	.quad	hand_c
	.quad	16
	.byte	0x48				# DW_CFA_advance_loc 8
	.byte	0x0e, 0x10
	.byte	0x0a				# DW_CFA_remember_state
	.byte	0x48
	.byte	0x0e, 0x20
	.byte	0x0b				# DW_CFA_restore_state
	.balign	8, 0
fde_e_end:

	.long	0				# zero terminator
	.section	.note.GNU-stack,"",@progbits

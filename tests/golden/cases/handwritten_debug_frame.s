# A hand-written .debug_frame (DWARF 5 section 6.4.1, section 7.4 for the 64-bit format):
#   * CIE version 4 with address_size 8 and segment_selector_size 0;
#   * CIE version 3 (return address column as ULEB128), see below;
#   * the 64-bit DWARF format: initial length 0xffffffff followed by an 8-byte length, CIE id
#     0xffffffffffffffff, 8-byte CIE pointer in the FDE;
#   * DW_CFA_set_loc with an absolute 8-byte address (relocated in the .o);
#   * two FDEs sharing one CIE. (An FDE whose CIE comes later: forward_cie_reference.s.)
	.text
	.globl	debug_a
	.type	debug_a, @function
debug_a:
	pushq	%rbx
	nop
	popq	%rbx
	ret
	.size	debug_a, .-debug_a
	.globl	debug_b
	.type	debug_b, @function
debug_b:
	subq	$8, %rsp
	addq	$8, %rsp
	ret
	.size	debug_b, .-debug_b
debug_end:

	.section	.debug_frame,"",@progbits
# ---- CIE version 4
cie_v4:
	.long	cie_v4_end - cie_v4_start
cie_v4_start:
	.long	0xffffffff			# CIE id (32-bit format)
	.byte	4				# version
	.asciz	""				# augmentation
	.byte	8				# address_size
	.byte	0				# segment_selector_size
	.uleb128 1
	.sleb128 -8
	.uleb128 16
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_v4_end:

fde_v4_a:
	.long	fde_v4_a_end - fde_v4_a_start
fde_v4_a_start:
	.long	cie_v4				# CIE pointer: section offset
	.quad	debug_a
	.quad	debug_b - debug_a
	.byte	0x41				# DW_CFA_advance_loc 1
	.byte	0x0e, 0x10
	.byte	0x83, 0x02			# DW_CFA_offset rbx cfa-16
	.byte	0x01				# DW_CFA_set_loc debug_a+2
	.quad	debug_a + 2
	.byte	0x0e, 0x08
	.byte	0xc3
	.balign	8, 0
fde_v4_a_end:

fde_v4_b:
	.long	fde_v4_b_end - fde_v4_b_start
fde_v4_b_start:
	.long	cie_v4
	.quad	debug_b
	.quad	debug_end - debug_b
	.byte	0x44				# DW_CFA_advance_loc 4
	.byte	0x0e, 0x10
	.byte	0x44
	.byte	0x0e, 0x08
	.balign	8, 0
fde_v4_b_end:

# ---- CIE version 3 and its FDE
cie_v3:
	.long	cie_v3_end - cie_v3_start
cie_v3_start:
	.long	0xffffffff
	.byte	3
	.asciz	""
	.uleb128 1
	.sleb128 -8
	.uleb128 16
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_v3_end:

fde_v3:
	.long	fde_v3_end - fde_v3_start
fde_v3_start:
	.long	cie_v3
	.quad	debug_b
	.quad	1
	.byte	0x07, 0x03			# DW_CFA_undefined rbx
	.balign	8, 0
fde_v3_end:

# ---- 64-bit DWARF format
cie_64:
	.long	0xffffffff
	.quad	cie_64_end - cie_64_start
cie_64_start:
	.quad	0xffffffffffffffff		# CIE id (64-bit format)
	.byte	4
	.asciz	""
	.byte	8
	.byte	0
	.uleb128 1
	.sleb128 -8
	.uleb128 16
	.byte	0x0c, 0x07, 0x08
	.byte	0x90, 0x01
	.balign	8, 0
cie_64_end:

fde_64:
	.long	0xffffffff
	.quad	fde_64_end - fde_64_start
fde_64_start:
	.quad	cie_64				# CIE pointer, 8 bytes
	.quad	debug_a
	.quad	debug_b - debug_a
	.byte	0x41
	.byte	0x0e, 0x10
	.byte	0x83, 0x02
	.byte	0x42
	.byte	0x0e, 0x08
	.byte	0xc3
	.balign	8, 0
fde_64_end:
	.section	.note.GNU-stack,"",@progbits

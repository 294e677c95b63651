# A .debug_frame FDE whose CIE pointer refers forward, to a CIE later in the section (legal:
# DWARF 5 section 6.4.1 only says it is an offset into .debug_frame). readelf -wf decodes it
# normally; readelf -wF, which reads CIEs as it meets them, prints that FDE with a zeroed CIE
# ("rax+0" CFA, no ra column). This file pins that behaviour separately from the rest.
	.text
	.globl	forward
	.type	forward, @function
forward:
	pushq	%rbx
	popq	%rbx
	ret
	.size	forward, .-forward

	.section	.debug_frame,"",@progbits
fde_forward:
	.long	fde_forward_end - fde_forward_start
fde_forward_start:
	.long	cie_v3
	.quad	forward
	.quad	1
	.byte	0x07, 0x03			# DW_CFA_undefined rbx
	.balign	8, 0
fde_forward_end:

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

	.section	.note.GNU-stack,"",@progbits

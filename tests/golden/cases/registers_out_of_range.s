# DWARF register numbers past readelf's x86-64 table (127 and up): -wf prints
# "bad register: rN" in each instruction, -wF prints those messages on stdout between the rows
# and keeps no column for them. Byte-exact compatibility means reproducing both.
	.text
	.globl	out_of_range_registers
	.type	out_of_range_registers, @function
out_of_range_registers:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	.cfi_offset 127, -24
	.cfi_offset 130, -32
	nop
	.cfi_offset 1000, -16
	.cfi_same_value 1000
	.cfi_undefined 300
	.cfi_register 255, 1000
	.cfi_register rbx, 200
	.cfi_val_offset 4000, 8
	.cfi_escape 0x10, 0x80, 0x08, 0x02, 0x77, 0x00	# DW_CFA_expression on r1024
	.cfi_escape 0x16, 0xff, 0x7f, 0x01, 0x30	# DW_CFA_val_expression on r16383
	nop
	.cfi_restore 200
	.cfi_restore 130
	.cfi_def_cfa 200, 8				# a CFA register past the table
	nop
	.cfi_def_cfa rsp, 16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	out_of_range_registers, .-out_of_range_registers
	.section	.note.GNU-stack,"",@progbits

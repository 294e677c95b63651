# Register numbering and naming (System V AMD64 ABI fig. 3.36 and readelf's x86-64 table):
# one save rule on each DWARF register 0..126 (readelf's table ends at 126), so every column
# name of readelf -wF and every "rN (name)" of -wf appears: rax..r15, rip, xmm0-15 (17-32),
# st0-7 (33-40), mm0-7 (41-48), rflags (49), es..gs (50-55), fs.base/gs.base (58/59), tr/ldtr
# (62/63), mxcsr/fcw/fsw (64-66), xmm16-31 (67-82), k0-7 (118-125), unnamed numbers between.
# Registers < 64 get DW_CFA_offset, the rest DW_CFA_offset_extended (gas chooses).
# registers_out_of_range.s has the numbers past the table.
	.text
	.globl	many_registers
	.type	many_registers, @function
many_registers:
	.cfi_startproc
	nop
	.cfi_offset 0, -16
	.cfi_offset 1, -24
	.cfi_offset 2, -32
	.cfi_offset 3, -40
	.cfi_offset 4, -48
	.cfi_offset 5, -56
	.cfi_offset 6, -64
	.cfi_offset 8, -80
	.cfi_offset 9, -88
	.cfi_offset 10, -96
	.cfi_offset 11, -104
	.cfi_offset 12, -112
	.cfi_offset 13, -120
	.cfi_offset 14, -128
	.cfi_offset 15, -136
	.cfi_offset 17, -152
	.cfi_offset 18, -160
	.cfi_offset 19, -168
	.cfi_offset 20, -16
	.cfi_offset 21, -24
	.cfi_offset 22, -32
	.cfi_offset 23, -40
	.cfi_offset 24, -48
	.cfi_offset 25, -56
	.cfi_offset 26, -64
	.cfi_offset 27, -72
	.cfi_offset 28, -80
	.cfi_offset 29, -88
	.cfi_offset 30, -96
	.cfi_offset 31, -104
	.cfi_offset 32, -112
	.cfi_offset 33, -120
	.cfi_offset 34, -128
	.cfi_offset 35, -136
	.cfi_offset 36, -144
	.cfi_offset 37, -152
	.cfi_offset 38, -160
	.cfi_offset 39, -168
	.cfi_offset 40, -16
	.cfi_offset 41, -24
	.cfi_offset 42, -32
	.cfi_offset 43, -40
	.cfi_offset 44, -48
	.cfi_offset 45, -56
	.cfi_offset 46, -64
	.cfi_offset 47, -72
	.cfi_offset 48, -80
	.cfi_offset 49, -88
	.cfi_offset 50, -96
	.cfi_offset 51, -104
	.cfi_offset 52, -112
	.cfi_offset 53, -120
	.cfi_offset 54, -128
	.cfi_offset 55, -136
	.cfi_offset 56, -144
	.cfi_offset 57, -152
	.cfi_offset 58, -160
	.cfi_offset 59, -168
	.cfi_offset 60, -16
	.cfi_offset 61, -24
	.cfi_offset 62, -32
	.cfi_offset 63, -40
	.cfi_offset 64, -48
	.cfi_offset 65, -56
	.cfi_offset 66, -64
	.cfi_offset 67, -72
	.cfi_offset 68, -80
	.cfi_offset 69, -88
	.cfi_offset 70, -96
	.cfi_offset 71, -104
	.cfi_offset 72, -112
	.cfi_offset 73, -120
	.cfi_offset 74, -128
	.cfi_offset 75, -136
	.cfi_offset 76, -144
	.cfi_offset 77, -152
	.cfi_offset 78, -160
	.cfi_offset 79, -168
	.cfi_offset 80, -16
	.cfi_offset 81, -24
	.cfi_offset 82, -32
	.cfi_offset 83, -40
	.cfi_offset 84, -48
	.cfi_offset 85, -56
	.cfi_offset 86, -64
	.cfi_offset 87, -72
	.cfi_offset 88, -80
	.cfi_offset 89, -88
	.cfi_offset 90, -96
	.cfi_offset 91, -104
	.cfi_offset 92, -112
	.cfi_offset 93, -120
	.cfi_offset 94, -128
	.cfi_offset 95, -136
	.cfi_offset 96, -144
	.cfi_offset 97, -152
	.cfi_offset 98, -160
	.cfi_offset 99, -168
	.cfi_offset 100, -16
	.cfi_offset 101, -24
	.cfi_offset 102, -32
	.cfi_offset 103, -40
	.cfi_offset 104, -48
	.cfi_offset 105, -56
	.cfi_offset 106, -64
	.cfi_offset 107, -72
	.cfi_offset 108, -80
	.cfi_offset 109, -88
	.cfi_offset 110, -96
	.cfi_offset 111, -104
	.cfi_offset 112, -112
	.cfi_offset 113, -120
	.cfi_offset 114, -128
	.cfi_offset 115, -136
	.cfi_offset 116, -144
	.cfi_offset 117, -152
	.cfi_offset 118, -160
	.cfi_offset 119, -168
	.cfi_offset 120, -16
	.cfi_offset 121, -24
	.cfi_offset 122, -32
	.cfi_offset 123, -40
	.cfi_offset 124, -48
	.cfi_offset 125, -56
	.cfi_offset 126, -64
	nop
	.cfi_same_value 126
	.cfi_undefined 125
	.cfi_register 64, 118
	.cfi_val_offset 100, 16
	nop
	.cfi_restore 82
	.cfi_restore 3
	ret
	.cfi_endproc
	.size	many_registers, .-many_registers
	.section	.note.GNU-stack,"",@progbits

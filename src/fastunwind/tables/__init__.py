"""The unwind tables built from a module image for the walker's fast paths: the compact table
(compact.py, native/core/compact_table.h) and the compiled eh_elf (eh_elf.py). Each keeps what it
derived in the image's `memo`; the walker falls back to the DWARF tables without them."""

"""eh_elf: an ELF file's unwind table compiled to native code (Bastian, Kell & Zappa Nardelli,
"Reliable and Fast DWARF-based Stack Unwinding", OOPSLA 2019), generated, built and cached.

Pipeline: the module's DWARF rows (`.eh_frame` first, then `.debug_frame`, resolved by the C core
exactly as the walker resolves them: `_core.eh_elf_rows`) -> C source (this module) -> the system
C compiler -> a shared object cached under `$XDG_CACHE_HOME/fastunwind/eh_elf/` -> loaded and
checked by `_core.EhElf` (native/py/py_eh_elf.c) -> the walker calls its `fu_eh_elf_step`.

The generated code (contract: src/fastunwind/include/fu_unwind_abi.h):

* **Bodies, outlined.** Every distinct row body (CFA rule + register rules + the CIE's return
  address column and signal flag, as C statements) is one hidden function `fu_body_N`, shared by
  every PC range that uses it: libc's 28,521 ranges need 395 bodies, libLLVM-14's 949,983 need 986.
  A body computes the CFA, then applies the rules in column order, exactly as walk.c's apply_row:
  the caller starts with the callee-saved registers, rsp = CFA; offset(N) reads [CFA+N] (a failed
  read is fatal for the return address only), val_offset, register, same_value, undefined;
  `DW_OP_bregN k` expressions and val_expressions (glibc's `__restore_rt`), GNU ld's PLT CFA
  expression and the DRAP `DW_OP_bregN k; DW_OP_deref` CFA are compiled; any other expression, a
  row without a CFA rule, returns FU_EH_ELF_INTERPRET (the walker asks the DWARF interpreter).
* **Ranges, table-driven.** Instead of the paper's if-tree over PCs, the ranges are data the step
  function searches: per 4 KiB page of the covered span, the index of the first range starting in
  it (u32); per range its start's offset in its page (u16) and its body (u16, u32 past 65,535
  bodies). 4 bytes a range instead of a compare-and-branch (8-16 bytes of code) per node of a
  tree; see docs/EH_ELF.md for the measurements. Gaps between FDEs are ranges of body 0: "no
  unwind information", never a neighbour's rule.
* **Translation units.** `main.c` (the step, the page index, the helpers), `bodies_K.c` (at most
  BODIES_PER_UNIT bodies each) and `rows_K.c` (ROWS_PER_CHUNK ranges each), compiled in parallel.

Generating twice gives the same bytes: bodies are numbered by first use in address order.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Sequence

from fastunwind import _core, cache
from fastunwind.image import ModuleImage
from fastunwind.errors import EhElfError, FastunwindError
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple

# What only compiling needs (concurrent.futures and the logging it brings, subprocess, tempfile,
# shutil, shlex) is imported where compiling starts: `fastunwind perf-script` loads cached eh_elfs
# through this module and would otherwise pay ~10 ms of imports for nothing.
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

#: Bump (core/eh_elf.h FU_EH_ELF_GENERATOR_VERSION) whenever the generated code's meaning or layout
#: changes: cached objects of another version are rebuilt. Stamped into fu_eh_elf_info and checked by
#: _core.EhElf and the launcher.
GENERATOR_VERSION: int = _core.EH_ELF_GENERATOR_VERSION

#: Ranges per rows_K.c unit. 65,536 (u16 low + u16 body each: 256 KiB of data) compile in about
#: 0.3 s with gcc 12 -O2; libLLVM-14 (950k ranges) becomes 15 units, spread over the cores.
ROWS_PER_CHUNK_SHIFT = 16
ROWS_PER_CHUNK = 1 << ROWS_PER_CHUNK_SHIFT
#: Bodies per bodies_K.c unit (a body is 20-60 lines of C).
BODIES_PER_UNIT = 512
#: One page index entry per 4 KiB of covered code: the binary search then runs over one page's
#: ranges (as the compact table's page index, which measured 69-105 -> 19-21 ns on libLLVM-14).
PAGE_SHIFT = 12

#: Files with at most this many ranges are one translation unit (ld.so: 2,436; libc: 28,521).
SINGLE_UNIT_RANGES = 8192

SUFFIX = cache.KINDS["eh_elf"]
DEFAULT_CC = "cc"
#: -O2: see docs/EH_ELF.md for -O1 against -O2 (compile time and step time).
OPTIMIZATION = os.environ.get("FASTUNWIND_EH_ELF_OPT", "-O2")

REGISTERS = _core.WALK_REGISTERS  #: DWARF 0..16 that the walker tracks; 16 is the return address slot
RSP, RA = _core.REG_RSP, _core.RETURN_ADDRESS_COLUMN
#: the x86-64 psABI's callee-saved registers (rbx, rbp, r12-r15), as the walker keeps them
CALLEE_SAVED = tuple(register for register in range(REGISTERS) if _core.CALLEE_SAVED_MASK >> register & 1)
DW_OP_BREG0, DW_OP_BREG31, DW_OP_DEREF = 0x70, 0x8F, 0x06
#: SLEB128 operands longer than this (63 bits) are not compiled: the interpreter decides them
MAX_SLEB_BYTES = 9


def cache_dir() -> str:
    """Where eh_elfs are cached: $XDG_CACHE_HOME/fastunwind/eh_elf (~/.cache by default)."""
    return cache.cache_dir("eh_elf")


def include_dir() -> str:
    """The directory of fu_unwind_abi.h, shipped inside the package."""
    return os.path.join(os.path.dirname(_core.__file__), "include")


def cache_path(image: ModuleImage, directory: str | None = None) -> str:
    return os.path.join(directory or cache_dir(), image.cache_name() + SUFFIX)


# ---- generation ---------------------------------------------------------------------------------


def _sleb(data: bytes, at: int) -> tuple[int, int] | None:
    """(value, next offset) of the SLEB128 at `at`, or None if truncated or too long to compile."""
    value = shift = 0
    for i in range(MAX_SLEB_BYTES):
        if at + i >= len(data):
            return None
        byte = data[at + i]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                value -= 1 << shift
            return value, at + i + 1
    return None


def _breg(expression: bytes | None, *, deref: bool) -> tuple[int, int] | None:
    """(N, k) if the expression is exactly `DW_OP_bregN k` (with deref: then `DW_OP_deref`), N one
    of the walker's registers; else None."""
    if not expression or not DW_OP_BREG0 <= expression[0] <= DW_OP_BREG31:
        return None
    register = expression[0] - DW_OP_BREG0
    operand = _sleb(expression, 1)
    if register >= REGISTERS or operand is None:
        return None
    k, end = operand
    tail = bytes([DW_OP_DEREF]) if deref else b""
    return (register, k) if expression[end:] == tail else None


def _plus(expression: str, k: int) -> str:
    """`expression + k` in uint64_t arithmetic (wraps like the interpreter's (uint64_t)value)."""
    if k == 0:
        return expression
    sign, magnitude = ("+", k) if k > 0 else ("-", -k)
    constant = f"{magnitude}u" if magnitude < 1 << 31 else f"UINT64_C({magnitude:#x})"
    return f"{expression} {sign} {constant}"


def _bit(register: int) -> str:
    return f"{1 << register:#x}u"


#: _core.eh_elf_rows' row description (eh_elf_rows.c describe_key): (table, signal frame, return
#: address column, address size, CFA rule, register rules), a rule being (kind, register, value,
#: expression) and a register rule (column, kind, register, value, expression)
Rule = tuple[int, int, int, "bytes | None"]
ColumnRule = tuple[int, int, int, int, "bytes | None"]
RowDescription = tuple[int, bool, int, int, Rule, tuple[ColumnRule, ...]]
#: a register rule of a walker register: (slot, column, kind, register, value, expression)
TrackedRule = tuple[int, int, int, int, int, "bytes | None"]

INTERPRET = ("return FU_EH_ELF_INTERPRET;",)
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def body_statements(description: RowDescription) -> tuple[str, ...]:
    """The C statements of one row body (walk.c apply_row, compiled): `regs` the callee's registers,
    `caller` the caller's to fill, which already holds the callee-saved registers of `regs` (the
    ABI: fu_eh_elf_step and the walker do that, as apply_row's start_caller)."""
    _table, signal, ra_column, address_size, cfa, rules = description
    kind, register, value, expression = cfa
    out: list[str] = []
    if kind == _core.RULE_CFA_REG_OFFSET:
        if register >= REGISTERS:
            return ("return FU_EH_ELF_REGISTER_UNKNOWN;",)
        out += [f"if (!(regs->valid & {_bit(register)})) return FU_EH_ELF_REGISTER_UNKNOWN;",
                f"uint64_t cfa = {_plus(f'regs->value[{register}]', value)};"]
    elif kind == _core.RULE_CFA_EXPRESSION and expression == _core.COMPACT_PLT_EXPRESSION:
        # DW_OP_breg7 8; DW_OP_breg16 0; lit15; and; lit11; ge; lit3; shl; plus
        mask = (1 << RSP) | (1 << RA)
        out += [f"if ((regs->valid & {mask:#x}u) != {mask:#x}u) return FU_EH_ELF_EXPRESSION_ERROR;",
                "uint64_t cfa = regs->value[7] + 8u + ((regs->value[16] & 15u) >= 11u ? 8u : 0u);"]
    elif kind == _core.RULE_CFA_EXPRESSION and address_size == 8 and (drap := _breg(expression, deref=True)):
        base, k = drap
        address = _plus(f"regs->value[{base}]", k)
        out += [f"if (!(regs->valid & {_bit(base)})) return FU_EH_ELF_EXPRESSION_ERROR;",
                "uint64_t cfa;",
                f"if (fu_in_window(reader, {address}, 8u)) cfa = fu_window_load(reader, {address});",
                f"else if ((failed = fu_read_required(reader, {address}, &cfa, fault))) return failed;"]
    else:
        return INTERPRET  # another expression, or no CFA rule
    out.append("fu_set(caller, 7, cfa);")  # caller holds regs' callee-saved registers (the ABI)
    tracked: list[TrackedRule] = [(RA if rule[0] == ra_column else rule[0], *rule) for rule in rules
               if (RA if rule[0] == ra_column else rule[0]) < REGISTERS]
    if any(kind in (_core.RULE_EXPRESSION, _core.RULE_VAL_EXPRESSION) and _breg(expression, deref=False) is None
           for _, _, kind, _, _, expression in tracked):
        return INTERPRET
    sequential = _rule_statements(tracked, signal, expressions_in_window=False)
    # Registers saved at `DW_OP_bregN k` addresses (glibc's __restore_rt: every register in the
    # signal context, rsp-relative): when all share one base register and the reader's window holds
    # all their slots, one check covers them and each is a plain load, the rules otherwise in the
    # same order; else the sequential statements, one checked read each.
    expression_slots = [(slot, breg) for slot, _, kind, _, _, expression in tracked
                        if kind == _core.RULE_EXPRESSION and (breg := _breg(expression, deref=False)) is not None]
    bases = {breg[0] for _, breg in expression_slots}
    slots = [slot for slot, *_ in tracked]
    if (len(expression_slots) > 1 and len(bases) == 1 and len(set(slots)) == len(slots)
            and all(INT16_MIN <= breg[1] <= INT16_MAX for _, breg in expression_slots)):
        base = bases.pop()
        low = min(breg[1] for _, breg in expression_slots)
        span = max(breg[1] for _, breg in expression_slots) - low + 8
        out.append(f"if ((regs->valid & {_bit(base)}) && "
                   f"fu_in_window(reader, {_plus(f'regs->value[{base}]', low)}, {span}u)) {{")
        out += ["    " + line for line in _rule_statements(tracked, signal, expressions_in_window=True)]
        out.append("}")
    out += sequential
    if any("(failed = " in line for line in out):
        out.insert(0, "int failed;")
    return tuple(out)


def _rule_statements(tracked: list[TrackedRule], signal: bool, expressions_in_window: bool) -> list[str]:
    """The register rules of a body after its CFA, ending in its return: `tracked` are the rules of
    the walker's registers as (slot, column, kind, register, value, expression). With
    `expressions_in_window`, the body has checked that the reader's window holds every
    `DW_OP_bregN k` save slot: those are plain loads."""
    out: list[str] = []
    window_mask = 0  # the registers loaded from the window, made valid together at the end
    # Save slots: the offset(N) rules. In a row without expression rules (nearly all), they are
    # read together after the other rules (each rule sets its own register, and only the return
    # address's read can fail the step, so the order changes nothing): one check that the reader's
    # window holds them all, then plain loads; else fu_restore_slots reads them one by one through
    # the reader from a table (the slow path, out of line: one copy for all bodies).
    slots = [(slot, rule_value) for slot, _, rule_kind, _, rule_value, _ in tracked if rule_kind == _core.RULE_OFFSET]
    grouped = bool(slots) and all(INT16_MIN <= offset <= INT16_MAX for _, offset in slots) and not any(
        rule_kind in (_core.RULE_EXPRESSION, _core.RULE_VAL_EXPRESSION) for _, _, rule_kind, *_ in tracked)
    for slot, column, rule_kind, rule_register, rule_value, rule_expression in tracked:
        if rule_kind == _core.RULE_UNDEFINED:
            out.append(f"caller->valid &= ~{_bit(slot)};")
        elif rule_kind in (_core.RULE_SAME_VALUE, _core.RULE_REGISTER):
            # an unknown source makes the register unknown, and fails the step for the return
            # address (walk_step.inc copy_unknown)
            source = column if rule_kind == _core.RULE_SAME_VALUE else rule_register
            if source >= REGISTERS:
                out.append("return FU_EH_ELF_REGISTER_UNKNOWN;" if slot == RA else f"caller->valid &= ~{_bit(slot)};")
            else:
                if slot == RA:
                    out.append(f"if (!(regs->valid & {_bit(source)})) return FU_EH_ELF_REGISTER_UNKNOWN;")
                out.append(f"fu_copy(regs, {source}, caller, {slot});")
        elif rule_kind == _core.RULE_OFFSET:
            if grouped:
                continue
            address = _plus("cfa", rule_value)
            if slot == RA:
                out.append(f"if ((failed = fu_restore_required(reader, {address}, caller, {slot}, fault))) "
                           "return failed;")
            else:
                out.append(f"fu_restore(reader, {address}, caller, {slot});")
        elif rule_kind == _core.RULE_VAL_OFFSET:
            out.append(f"fu_set(caller, {slot}, {_plus('cfa', rule_value)});")
        elif rule_kind in (_core.RULE_EXPRESSION, _core.RULE_VAL_EXPRESSION):
            breg = _breg(rule_expression, deref=False)
            assert breg is not None  # body_statements interprets a body with any other expression
            base, k = breg
            address = _plus(f"regs->value[{base}]", k)
            if rule_kind == _core.RULE_EXPRESSION and expressions_in_window:
                out.append(f"caller->value[{slot}] = fu_window_load(reader, {address});")
                window_mask |= 1 << slot
                continue
            out.append(f"if (!(regs->valid & {_bit(base)})) return FU_EH_ELF_EXPRESSION_ERROR;")
            if rule_kind == _core.RULE_EXPRESSION:  # the value is at the address (read fatally, any register)
                out.append(f"if ((failed = fu_restore_required(reader, {address}, caller, {slot}, fault))) "
                           "return failed;")
            else:
                out.append(f"fu_set(caller, {slot}, {address});")
        # other kinds: the interpreter skips them too
    if window_mask:  # the slots are distinct registers: no other rule touches these bits
        out.append(f"caller->valid |= {window_mask:#x}u;")
    success = "FU_EH_ELF_SIGNAL" if signal else "FU_EH_ELF_CFI"
    if grouped:
        low = min(offset for _, offset in slots)
        span = max(offset for _, offset in slots) - low + 8
        mask = sum(1 << slot for slot, _ in slots)
        table = ", ".join(f"{{{offset}, {slot}}}" for slot, offset in slots)
        out.append(f"static const fu_slot fu_slots[{len(slots)}] = {{{table}}};")
        out.append(f"if (fu_in_window(reader, {_plus('cfa', low)}, {span}u)) {{")
        out += [f"    caller->value[{slot}] = fu_window_load(reader, {_plus('cfa', offset)});" for slot, offset in slots]
        out += [f"    caller->valid |= {mask:#x}u;", f"    return {success};", "}"]
        out.append(f"return (failed = fu_restore_slots(reader, cfa, caller, fu_slots, {len(slots)}u, fault)) ? "
                   f"failed : {success};")
    elif not signal and out and out[-1].startswith("if ((failed = fu_restore_required("):
        # the last rule's read decides: fu_restore_required returns 0 (FU_EH_ELF_CFI) or the failure
        out[-1] = "return " + out[-1][len("if ((failed = "):-len(")) return failed;")] + ";"
    else:
        out.append(f"return {success};")
    return out


class Generated(NamedTuple):
    """The C of one eh_elf: `units` by file name (main.c, bodies_K.c, rows_K.c, eh_elf_generated.h),
    filled by generate()."""

    path: str
    key_kind: int
    key: bytes
    row_count: int  #: DWARF rows it was built from
    frame_sizes: tuple[int | None, int | None]  #: ModuleImage.frame_sizes of its module
    range_count: int  #: ranges in the lookup table, gaps included
    body_count: int
    interpret_ranges: int  #: ranges whose body returns FU_EH_ELF_INTERPRET
    units: dict[str, str]

    @property
    def sources(self) -> list[str]:
        return [name for name in self.units if name.endswith(".c")]


def _frame_size(size: int | None) -> str:
    """A fu_eh_elf_info section size in C (FU_EH_ELF_NO_SECTION for a section the module lacks)."""
    return "FU_EH_ELF_NO_SECTION" if size is None else f"UINT64_C({size})"


def _numbers(values: Sequence[int], per_line: int = 24) -> str:
    return _numbers_text([str(v) for v in values], per_line)


def _numbers_text(items: Sequence[str], per_line: int = 24) -> str:
    return ",\n".join(", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line))


#: fu_eh_elf_find's search in the table lookup (`offset` = pc - FU_BASE, below FU_SPAN)
TABLE_SEARCH = """    uint32_t page = (uint32_t)(offset >> FU_PAGE_SHIFT), low = (uint32_t)offset & ((1u << FU_PAGE_SHIFT) - 1);
    /* the last range starting at or before pc: among the page's ranges, else the page's predecessor's
     * last (page 0 starts with range 0 at offset 0, so lo ends at least at 1) */
    uint32_t lo = fu_page_first[page], n = fu_page_first[page + 1] - lo;
    while (n > 0) {
        uint32_t half = n / 2;
        if (FU_LOW(lo + half) <= low) {
            lo += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    return FU_BODY_OF(lo - 1);"""

#: the two ways to find a PC's range (see docs/EH_ELF.md): "table" (the default: a page index, then a
#: binary search over u16 starts) or "tree" (the paper's: the search unrolled into nested ifs)
LOOKUPS = ("table", "tree")
#: ranges per function of the tree lookup (a function of this many ifs compiles in well under a second)
TREE_RANGES_PER_FUNCTION = 2048
#: tree functions per translation unit
TREE_FUNCTIONS_PER_UNIT = 4


def _if_tree(starts: Sequence[int], bodies: Sequence[int], lo: int, hi: int, indent: str,
             leaf: Callable[[int], str]) -> list[str]:
    """Nested ifs over ranges lo..hi-1 of `starts` (x is at least starts[lo]): `leaf(i)` is the
    statement for range i. Depth log2(hi - lo)."""
    if hi - lo == 1:
        return [f"{indent}{leaf(lo)}"]
    mid = (lo + hi) // 2
    return [f"{indent}if (x < {starts[mid]}u) {{", *_if_tree(starts, bodies, lo, mid, indent + "    ", leaf),
            f"{indent}}}", *_if_tree(starts, bodies, mid, hi, indent, leaf)]


def _tree_units(header: str, starts: Sequence[int], bodies: Sequence[int]) -> tuple[str, str, dict[str, str]]:
    """The tree lookup: the prototypes and the search for main.c (`offset` = pc - FU_BASE, below
    FU_SPAN), and the units holding one function per TREE_RANGES_PER_FUNCTION ranges."""
    functions = (len(starts) + TREE_RANGES_PER_FUNCTION - 1) // TREE_RANGES_PER_FUNCTION
    units: dict[str, str] = {}
    for unit in range((functions + TREE_FUNCTIONS_PER_UNIT - 1) // TREE_FUNCTIONS_PER_UNIT):
        text = [header, '#include "eh_elf_generated.h"\n']
        for f in range(unit * TREE_FUNCTIONS_PER_UNIT, min(functions, (unit + 1) * TREE_FUNCTIONS_PER_UNIT)):
            lo, hi = f * TREE_RANGES_PER_FUNCTION, min(len(starts), (f + 1) * TREE_RANGES_PER_FUNCTION)
            lines = _if_tree(starts, bodies, lo, hi, "    ", lambda i: f"return {bodies[i]};")
            text.append(f"FU_HIDDEN unsigned fu_tree_{f}(uint32_t x)\n{{\n" + "\n".join(lines) + "\n}\n")
        units[f"tree_{unit}.c"] = "\n".join(text)
    firsts = [starts[f * TREE_RANGES_PER_FUNCTION] for f in range(functions)]
    prototypes = "".join(f"FU_HIDDEN unsigned fu_tree_{f}(uint32_t x);\n" for f in range(functions))
    top = _if_tree(firsts, range(functions), 0, functions, "    ", lambda f: f"return fu_tree_{f}(x);")
    return prototypes, "    uint32_t x = (uint32_t)offset;\n" + "\n".join(top), units


def generate(image: ModuleImage, lookup: str = "table") -> Generated:
    """The C source of `image`'s eh_elf, with the range `lookup` of LOOKUPS. Raises EhElfError if
    the file has no CFI rows."""
    import array

    if image.eh_frame is None and image.debug_frame is None:
        raise EhElfError(f"{image.path}: no .eh_frame or .debug_frame (in the file or a separate debug "
                         "file): nothing to compile")
    base, end, starts_bytes, keys_bytes, descriptions = _core.eh_elf_rows(image.eh_frame, image.debug_frame)
    if not keys_bytes:
        raise EhElfError(f"{image.path}: its call frame information has no rows (every FDE empty or "
                         "malformed): nothing to compile")
    if end - base >= 1 << 32:
        raise EhElfError(f"{image.path}: its CFI spans {base:#x}..{end:#x}, beyond the 4 GiB an eh_elf addresses")
    starts = array.array("Q")
    starts.frombytes(starts_bytes)
    keys = array.array("I")
    keys.frombytes(keys_bytes)

    # bodies numbered by first use in address order (deterministic); 0 = no unwind information
    body_ids: dict[tuple[str, ...], int] = {}
    body_of_key = [body_statements(d) for d in descriptions]
    bodies: list[tuple[str, ...]] = []
    range_starts: list[int] = []
    range_bodies: list[int] = []
    interpret_ranges = 0
    for start, key in zip(starts, keys):
        if key == _core.EH_ELF_NO_KEY:
            body = 0
        else:
            statements = body_of_key[key]
            body = body_ids.get(statements, 0)
            if not body:
                bodies.append(statements)
                body = body_ids[statements] = len(bodies)
        if range_bodies and range_bodies[-1] == body:
            continue  # two DWARF states, one body (e.g. they differ in a vector register only)
        range_starts.append(start - base)
        range_bodies.append(body)
        interpret_ranges += body != 0 and bodies[body - 1] == INTERPRET
    kind, key_bytes = image.cache_key()
    generated = Generated(image.path, kind, key_bytes, image.dwarf_row_count(), image.frame_sizes(),
                          len(range_starts), len(bodies), interpret_ranges, {})
    if lookup not in LOOKUPS:
        raise ValueError(f"lookup {lookup!r}: one of {', '.join(LOOKUPS)}")
    header = _do_not_edit(image, kind, key_bytes)
    span = end - base
    body_type = "uint16_t" if len(bodies) < 1 << 16 else "uint32_t"
    units = generated.units
    if lookup == "tree":
        prototypes, search, tree_units = _tree_units(header, range_starts, range_bodies)
        units["eh_elf_generated.h"] = _common_header(header, body_type, 0, len(bodies))
        units["main.c"] = _main_unit(header, generated, base, span, [], 0, len(bodies), (prototypes, search))
        _add_body_units(units, header, bodies)
        units.update(tree_units)
        return generated
    pages = ((span - 1) >> PAGE_SHIFT) + 1
    page_first = array.array("I", [0]) * (pages + 1)
    index = 0
    for page in range(pages + 1):
        page_start = page << PAGE_SHIFT
        while index < len(range_starts) and range_starts[index] < page_start:
            index += 1
        page_first[page] = index
    chunks = (len(range_starts) + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    units["eh_elf_generated.h"] = _common_header(header, body_type, chunks, len(bodies))
    units["main.c"] = _main_unit(header, generated, base, span, page_first, chunks, len(bodies))
    _add_body_units(units, header, bodies)
    for chunk in range(chunks):
        first = chunk * ROWS_PER_CHUNK
        part = slice(first, first + ROWS_PER_CHUNK)
        lows = [s & ((1 << PAGE_SHIFT) - 1) for s in range_starts[part]]
        units[f"rows_{chunk}.c"] = (
            f"{header}#include \"eh_elf_generated.h\"\n\n"
            f"/* ranges {first}..{first + len(lows) - 1}: start offsets in their page, then bodies */\n"
            f"const uint16_t fu_low_{chunk}[{len(lows)}] = {{\n{_numbers(lows)}\n}};\n"
            f"const fu_body_id fu_body_{chunk}_of[{len(lows)}] = {{\n{_numbers(range_bodies[part])}\n}};\n"
        )
    if len(generated.sources) == 3 and len(range_starts) <= SINGLE_UNIT_RANGES:
        # a small file: one unit (each compiler process costs ~0.3 s before it reads a line)
        tails = [units.pop(name).split("\n", 1)[1] for name in ("bodies_0.c", "rows_0.c")]
        units["main.c"] += "".join(tails)
    return generated


def _add_body_units(units: dict[str, str], header: str, bodies: Sequence[tuple[str, ...]]) -> None:
    for unit in range((len(bodies) + BODIES_PER_UNIT - 1) // BODIES_PER_UNIT):
        first = unit * BODIES_PER_UNIT
        text = [header, '#include "eh_elf_generated.h"\n']
        for number, statements in enumerate(bodies[first:first + BODIES_PER_UNIT], start=first + 1):
            text.append(f"FU_BODY(fu_body_{number})\n{{\n    " + "\n    ".join(statements) + "\n}\n")
        units[f"bodies_{unit}.c"] = "\n".join(text)


def _do_not_edit(image: ModuleImage, kind: int, key: bytes) -> str:
    what = "build-id" if kind == _core.COMPACT_KEY_BUILD_ID else "no build-id, file hash"
    return (f"/* DO NOT EDIT: generated by fastunwind.eh_elf generator version {GENERATOR_VERSION} from "
            f"{image.path} ({what} {key.hex()}) */\n")


def _common_header(header: str, body_type: str, chunks: int, body_count: int) -> str:
    declarations = "\n".join(f"extern const uint16_t fu_low_{c}[];\nextern const fu_body_id fu_body_{c}_of[];"
                             for c in range(chunks))
    keep_callee_saved = "\n".join(f"    caller->value[{r}] = regs->value[{r}];" for r in CALLEE_SAVED)
    return f"""{header}#ifndef FU_EH_ELF_GENERATED_H
#define FU_EH_ELF_GENERATED_H
#include "fu_unwind_abi.h"

#define FU_HIDDEN __attribute__((visibility("hidden")))
/* A row body: the caller's registers from the callee's, see fastunwind/tables/eh_elf.py. */
#define FU_BODY(name) FU_HIDDEN int name(const fu_regs *regs, fu_regs *caller, const fu_reader *reader, \\
                                         uint64_t *fault)
typedef {body_type} fu_body_id;

/* the x86-64 psABI's callee-saved registers (rbx, rbp, r12-r15), kept by the caller unless a rule says */
#define FU_CALLEE_SAVED_MASK {_core.CALLEE_SAVED_MASK:#x}u

static inline void fu_set(fu_regs *caller, unsigned slot, uint64_t value)
{{
    caller->value[slot] = value;
    caller->valid |= 1u << slot;
}}

/* What a body expects to find in `caller` (the ABI; fu_eh_elf_step does it for its callers): the
 * callee-saved registers keep their values, the rest is unknown (values of invalid registers are
 * never read, so only those six are copied). */
static inline void fu_start_caller(const fu_regs *regs, fu_regs *caller)
{{
{keep_callee_saved}
    caller->valid = regs->valid & FU_CALLEE_SAVED_MASK;
}}

/* main.c, out of line (the slow paths: one copy, not one per body). A required read that fails
 * returns FU_EH_ELF_UNREADABLE or _PAST_DUMP with the address in *fault (0 on success);
 * fu_restore's failure makes the register unknown. */
FU_HIDDEN int fu_read_required(const fu_reader *reader, uint64_t address, uint64_t *out, uint64_t *fault);
FU_HIDDEN int fu_restore_required(const fu_reader *reader, uint64_t address, fu_regs *caller, unsigned slot,
                                  uint64_t *fault);
FU_HIDDEN void fu_restore(const fu_reader *reader, uint64_t address, fu_regs *caller, unsigned slot);

/* a save slot: register `slot` (FU_REG_RA: the return address) at CFA + offset */
typedef struct fu_slot {{
    int16_t offset;
    uint8_t slot;
}} fu_slot;
/* each slot through the reader, in order: fu_restore, or fu_restore_required for the return address */
FU_HIDDEN int fu_restore_slots(const fu_reader *reader, uint64_t cfa, fu_regs *caller, const fu_slot *slots,
                               unsigned count, uint64_t *fault);

/* Whether [first, first + size) lies in the reader's window: then every slot in it is a plain load. */
static inline bool fu_in_window(const fu_reader *reader, uint64_t first, uint64_t size)
{{
    uint64_t offset = first - reader->window_address; /* wraps below the window */
    return offset <= reader->window_size && size <= reader->window_size - offset;
}}

/* a slot inside the window fu_in_window checked */
static inline uint64_t fu_window_load(const fu_reader *reader, uint64_t address)
{{
    uint64_t value;
    memcpy(&value, reader->window + (address - reader->window_address), 8);
    return value;
}}

/* same_value / register(R): the callee's register if known, else unknown */
static inline void fu_copy(const fu_regs *regs, unsigned source, fu_regs *caller, unsigned slot)
{{
    if (regs->valid >> source & 1)
        fu_set(caller, slot, regs->value[source]);
    else
        caller->valid &= ~(1u << slot);
}}

{declarations}
#endif
"""


def _main_unit(header: str, g: Generated, base: int, span: int, page_first: Sequence[int], chunks: int,
               body_count: int, tree: tuple[str, str] | None = None) -> str:
    """main.c: the info, the slow paths, the body table, fu_eh_elf_find (the page-indexed table
    search, or with `tree` = (prototypes, search) the tree's) and fu_eh_elf_step."""
    key = ", ".join(f"0x{b:02x}" for b in g.key)
    prototypes = "\n".join(f"FU_BODY(fu_body_{n});" for n in range(1, body_count + 1))
    bodies = _numbers_text([f"fu_body_{n}" for n in range(1, body_count + 1)])
    access = ""
    if chunks == 1:
        access = "#define FU_LOW(i) fu_low_0[i]\n#define FU_BODY_OF(i) fu_body_0_of[i]\n"
    elif chunks > 1:
        lows = ", ".join(f"fu_low_{c}" for c in range(chunks))
        ids = ", ".join(f"fu_body_{c}_of" for c in range(chunks))
        access = (f"static const uint16_t *const fu_low_chunks[{chunks}] = {{{lows}}};\n"
                  f"static const fu_body_id *const fu_body_chunks[{chunks}] = {{{ids}}};\n"
                  f"#define FU_LOW(i) fu_low_chunks[(i) >> {ROWS_PER_CHUNK_SHIFT}][(i) & {ROWS_PER_CHUNK - 1}u]\n"
                  f"#define FU_BODY_OF(i) fu_body_chunks[(i) >> {ROWS_PER_CHUNK_SHIFT}][(i) & {ROWS_PER_CHUNK - 1}u]\n")
    if tree is None:
        lookup_data = (f"/* page p's ranges are [fu_page_first[p], fu_page_first[p + 1]) */\n"
                       f"static const uint32_t fu_page_first[{len(page_first)}] = {{\n{_numbers(page_first)}\n}};\n"
                       f"{access}")
        search = TABLE_SEARCH
    else:
        lookup_data, search = tree
    return f"""{header}#include "eh_elf_generated.h"

/* {g.range_count} ranges over svma {base:#x}..{base + span:#x}, {g.body_count} bodies, from {g.row_count} DWARF rows */
#define FU_BASE UINT64_C({base:#x})
#define FU_SPAN UINT64_C({span:#x})
#define FU_PAGE_SHIFT {PAGE_SHIFT}

/* exported as fu_eh_elf_info (the ABI's name; in C that identifier is the struct's typedef) */
__attribute__((visibility("default"))) const struct fu_eh_elf_info fu_info __asm__("fu_eh_elf_info") = {{
    FU_UNWIND_ABI_VERSION, {GENERATOR_VERSION}, {g.key_kind}, {len(g.key)}, {{{key}}}, {g.row_count}u,
    {body_count}u, 0, {_frame_size(g.frame_sizes[0])}, {_frame_size(g.frame_sizes[1])}
}};

{lookup_data}
FU_HIDDEN int fu_read_required(const fu_reader *reader, uint64_t address, uint64_t *out, uint64_t *fault)
{{
    fu_read_status status = fu_reader_read(reader, address, 8, out);
    if (status == FU_READ_OK)
        return 0;
    *fault = address;
    return status == FU_READ_PAST_DUMP ? FU_EH_ELF_PAST_DUMP : FU_EH_ELF_UNREADABLE;
}}

FU_HIDDEN int fu_restore_required(const fu_reader *reader, uint64_t address, fu_regs *caller, unsigned slot,
                                  uint64_t *fault)
{{
    uint64_t value;
    int failed = fu_read_required(reader, address, &value, fault);
    if (failed)
        return failed;
    fu_set(caller, slot, value);
    return 0;
}}

FU_HIDDEN void fu_restore(const fu_reader *reader, uint64_t address, fu_regs *caller, unsigned slot)
{{
    uint64_t value;
    if (fu_reader_read(reader, address, 8, &value) == FU_READ_OK)
        fu_set(caller, slot, value);
    else
        caller->valid &= ~(1u << slot);
}}

FU_HIDDEN int fu_restore_slots(const fu_reader *reader, uint64_t cfa, fu_regs *caller, const fu_slot *slots,
                               unsigned count, uint64_t *fault)
{{
    for (unsigned i = 0; i < count; i++) {{
        uint64_t address = cfa + (uint64_t)(int64_t)slots[i].offset;
        if (slots[i].slot == FU_REG_RA) {{
            int failed = fu_restore_required(reader, address, caller, FU_REG_RA, fault);
            if (failed)
                return failed;
        }} else {{
            fu_restore(reader, address, caller, slots[i].slot);
        }}
    }}
    return 0;
}}

{prototypes}

/* the bodies by number, for fu_eh_elf_step and for callers that remember the body of a PC */
__attribute__((visibility("default"))) const fu_eh_elf_body_fn fu_eh_elf_bodies[{body_count + 1}] = {{
NULL,
{bodies}
}};

/* The body in force at svma pc: 0 where no FDE covers it (exported as fu_eh_elf_find). */
__attribute__((visibility("default"))) unsigned fu_eh_elf_find(uint64_t pc)
{{
    uint64_t offset = pc - FU_BASE; /* wraps below FU_BASE */
    if (offset >= FU_SPAN)
        return 0;
{search}
}}

__attribute__((visibility("default"))) int fu_eh_elf_step(uint64_t pc, const fu_regs *regs, fu_regs *caller,
                                                          const fu_reader *reader, uint64_t *fault_address)
{{
    unsigned body = fu_eh_elf_find(pc);
    if (body == 0)
        return FU_EH_ELF_NO_INFO;
    fu_start_caller(regs, caller);
    return fu_eh_elf_bodies[body](regs, caller, reader, fault_address);
}}
"""


# ---- compiling ----------------------------------------------------------------------------------


def compiler() -> list[str]:
    """The C compiler command: $CC (split like a shell would: "ccache gcc" works), else cc."""
    import shlex

    return shlex.split(os.environ.get("CC") or DEFAULT_CC) or [DEFAULT_CC]


def _run(command: list[str], what: str, cwd: str) -> float:
    """Run the compiler; its wall time in seconds. EhElfError naming `what` if it fails or is missing."""
    import shlex
    import subprocess

    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as error:
        raise EhElfError(f"{what}: cannot run the C compiler {command[0]!r} ({error.strerror or error}); "
                         "install gcc or set CC") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        if len(output) > 2000:
            output = output[:2000] + "\n[...]"
        raise EhElfError(f"{what}: {shlex.join(command)} failed with status {done.returncode}:\n{output}")
    return time.perf_counter() - started


def _compile_flags() -> list[str]:
    return [OPTIMIZATION, "-std=c11", "-fPIC", "-fvisibility=hidden", "-w", "-I", include_dir(), "-I", "."]


class Build:
    """One eh_elf being built: its generated units, their compile jobs, then the link."""

    def __init__(self, image: ModuleImage, target: str) -> None:
        self.image = image
        self.target = target
        self.generated: Generated | None = None
        self.workdir = ""
        self.jobs: list[Future[float]] = []
        self.generate_seconds = 0.0


class CompileResult(NamedTuple):
    path: str
    target: str  #: the cached shared object
    source: str  #: "cache" (already built and valid) or "built"
    generate_seconds: float = 0.0
    compile_seconds: float = 0.0  #: compiler time: its units' compiles (in parallel) plus the link
    ranges: int = 0
    bodies: int = 0
    units: int = 0
    interpret_ranges: int = 0
    eh_elf: _core.EhElf | None = None


def open_cached(image: ModuleImage, target: str | None = None) -> _core.EhElf:
    """The checked eh_elf of `image` at `target` (default: its cache path). Raises EhElfError
    (missing, truncated, not an ELF file, another ABI or generator version, key, or the sizes of the CFI sections it was built from)."""
    target = target or cache_path(image)
    if not os.path.exists(target):
        raise EhElfError(f"eh_elf {target}: not built (fastunwind compile {image.path})")
    kind, key = image.cache_key()
    return _core.EhElf(target, kind, key, generator_version=GENERATOR_VERSION, frame_sizes=image.frame_sizes())


def load(image: ModuleImage, directory: str | None = None) -> _core.EhElf | None:
    """The cached eh_elf of `image` if there is a valid one, else None (it is never built here:
    compiling takes seconds; `fastunwind compile` does it)."""
    try:
        return open_cached(image, cache_path(image, directory))
    except (EhElfError, OSError):
        return None


def enabled() -> bool:
    """FASTUNWIND_COMPILED=0 disables eh_elfs."""
    return os.environ.get("FASTUNWIND_COMPILED", "1") != "0"


def for_image(image: ModuleImage) -> _core.EhElf | None:
    """The image's eh_elf if `fastunwind compile` cached a valid one (checked: ABI and generator
    version, build-id, CFI section sizes), else None; looked up on first use, then kept in its memo."""
    if "eh_elf" not in image.memo:
        image.memo["eh_elf"] = load(image) if enabled() else None
    eh_elf: _core.EhElf | None = image.memo["eh_elf"]
    return eh_elf


def compile_images(images: Iterable[ModuleImage], *, jobs: int | None = None, directory: str | None = None,
                   force: bool = False, on_progress: Callable[[str, CompileResult | EhElfError], None] | None = None,
                   on_unit: Callable[[str, str, bool], None] | None = None,
                   lookup: str = "table") -> list[CompileResult | EhElfError]:
    """Build (or find valid in the cache) the eh_elf of every image. Generation runs here while the
    compiler runs on `jobs` threads (default: the CPU count); each result is a CompileResult, or the
    EhElfError that says why that file has none. `on_progress(path, result)` after each file;
    `on_unit(path, unit, compiled)` as each C unit is queued (False) and once compiled (True, from
    a compiler thread). `lookup`: one of LOOKUPS for what is built (a valid cached eh_elf is used
    whichever it has)."""
    directory = directory or cache_dir()
    os.makedirs(directory, exist_ok=True)
    jobs = max(1, jobs or os.cpu_count() or 1)
    results: list[CompileResult | EhElfError] = []
    builds: list[Build | CompileResult | EhElfError] = []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for image in images:
            builds.append(_start(image, directory, force, pool, lookup, on_unit))
            if isinstance(builds[-1], (CompileResult, EhElfError)) and on_progress:
                on_progress(image.path, builds[-1])
        for build in builds:
            if isinstance(build, Build):
                result = _finish(build)
                if on_progress:
                    on_progress(build.image.path, result)
                results.append(result)
            else:
                results.append(build)
    return results


def _start(image: ModuleImage, directory: str, force: bool, pool: "ThreadPoolExecutor", lookup: str,
           on_unit: Callable[[str, str, bool], None] | None = None) -> Build | CompileResult | EhElfError:
    target = cache_path(image, directory)
    if not force:
        try:
            eh_elf = open_cached(image, target)
            return CompileResult(image.path, target, "cache", eh_elf=eh_elf)
        except EhElfError:
            pass  # missing, stale or corrupt: rebuilt
    build = Build(image, target)
    started = time.perf_counter()
    try:
        build.generated = generate(image, lookup)
    except FastunwindError as error:
        return error if isinstance(error, EhElfError) else EhElfError(f"{image.path}: {error}")
    build.generate_seconds = time.perf_counter() - started
    import tempfile

    build.workdir = tempfile.mkdtemp(dir=directory, prefix=".build-")
    for name, text in build.generated.units.items():
        with open(os.path.join(build.workdir, name), "w") as out:
            out.write(text)
    command = compiler() + _compile_flags()
    for name in build.generated.sources:
        what = f"{image.path}: compiling its eh_elf unit {name}"
        job = pool.submit(_run, command + ["-c", name, "-o", name[:-2] + ".o"], what, build.workdir)
        if on_unit is not None:
            on_unit(image.path, name, False)
            job.add_done_callback(functools.partial(_unit_compiled, on_unit, image.path, name))
        build.jobs.append(job)
    return build


def _unit_compiled(on_unit: Callable[[str, str, bool], None], path: str, unit: str, _job: object) -> None:
    on_unit(path, unit, True)


def _finish(build: Build) -> CompileResult | EhElfError:
    import shutil

    generated = build.generated
    assert generated is not None  # _start returns a Build only after generating
    try:
        compile_seconds = sum(job.result() for job in build.jobs)
        objects = [name[:-2] + ".o" for name in generated.sources]
        linked = os.path.join(build.workdir, "eh_elf.so")
        compile_seconds += _run(compiler() + ["-shared", "-o", linked, *objects],
                                f"{build.image.path}: linking its eh_elf", build.workdir)
        # check before publishing: what is in the cache is always loadable
        kind, key = build.image.cache_key()
        _core.EhElf(linked, kind, key, generator_version=GENERATOR_VERSION, frame_sizes=generated.frame_sizes)
        os.replace(linked, build.target)  # atomic within the cache's file system
        eh_elf = open_cached(build.image, build.target)
    except EhElfError as error:
        return error
    finally:
        for job in build.jobs:
            job.cancel()
        shutil.rmtree(build.workdir, ignore_errors=True)
    return CompileResult(build.image.path, build.target, "built", build.generate_seconds, compile_seconds,
                         generated.range_count, generated.body_count, len(generated.sources),
                         generated.interpret_ranges, eh_elf)


def write_sources(image: ModuleImage, directory: str, lookup: str = "table") -> Generated:
    """Generate `image`'s eh_elf C into `directory` (for reading it, or building it by hand)."""
    generated = generate(image, lookup)
    os.makedirs(directory, exist_ok=True)
    for name, text in generated.units.items():
        with open(os.path.join(directory, name), "w") as out:
            out.write(text)
    return generated

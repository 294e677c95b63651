"""The Python package's imports point one way (issue 22): every module of src/fastunwind sits in one
layer of LAYERS, and may import only modules of the layers below its own. Every import counts:
top-level, inside functions (the lazy ones that keep start-up short) and under TYPE_CHECKING. So
there are no cycles, hidden or not, and a new module must be given its place here.

LAYERS is the one home of the rank table; docs quote it.

Also: the native files the package's docstrings and comments name (`native/walk.c`) exist, so that
moving a C file makes the Python that points to it say where it went.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import fastunwind

PACKAGE = Path(fastunwind.__file__).parent

#: top to bottom; a module imports only modules of the layers after its own
LAYERS: tuple[tuple[str, ...], ...] = (
    ("fastunwind.__main__",),
    ("fastunwind.cli",),
    # record drives perf (or, with --bpf, the in-kernel unwinder) and hands the pipe to perf-script's output
    ("fastunwind.commands.record",),
    ("fastunwind.commands.backtrace", "fastunwind.commands.bench", "fastunwind.commands.cache", "fastunwind.commands.check", "fastunwind.commands.compile",
     "fastunwind.commands.core",
     "fastunwind.commands.lookup", "fastunwind.commands.perf_script", "fastunwind.commands.record_bpf",
     "fastunwind.commands.report",
     "fastunwind.commands.synth", "fastunwind.commands.table"),
    ("fastunwind.commands",),
    # compatibility names the docs document: thin re-exports of the modules below
    ("fastunwind.bench", "fastunwind.eh_elf", "fastunwind.perf_script"),
    # perf/: the stages of a recording, each importing only the ones before it
    ("fastunwind.perf.bench", "fastunwind.perf.report"),
    ("fastunwind.perf.script",),
    ("fastunwind.perf.walk", "fastunwind.perf.sample_filter"),
    ("fastunwind.perf.replay",),
    ("fastunwind.perf.data", "fastunwind.perf.record"),
    ("fastunwind.perf",),
    # the package's own names: the top-level API, imported lazily (fastunwind/__init__.py)
    ("fastunwind",),
    # the sources of thread stacks: a live process, a core file
    ("fastunwind.live", "fastunwind.core"),
    # the symbolized stacks of a process's threads, shared by the live and core-file sources
    ("fastunwind.stacks",),
    ("fastunwind.bpf", "fastunwind.trace", "fastunwind.walk"),
    ("fastunwind.address_space",),
    ("fastunwind.tables.compact", "fastunwind.tables.eh_elf"),
    ("fastunwind.tables.synthesized",),
    ("fastunwind.synth",),
    ("fastunwind.check",),
    ("fastunwind.tables",),
    ("fastunwind.image",),
    ("fastunwind.cfi_print", "fastunwind.srcline", "fastunwind.symbols"),
    ("fastunwind.cfi",),
    ("fastunwind.frame_sections",),
    ("fastunwind.elf.build_id_cache", "fastunwind.elf.debug_files", "fastunwind.elf.debug_file_writer", "fastunwind.elf.debuginfod",
     "fastunwind.elf.dynamic", "fastunwind.script"),
    ("fastunwind.elf",),
    ("fastunwind.cache",),
    ("fastunwind.errors", "fastunwind._core", "fastunwind.typecheck"),
)

RANK = {module: len(LAYERS) - depth for depth, layer in enumerate(LAYERS) for module in layer}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source: `from fastunwind.x import y`
    names fastunwind.x.y when that is a module, else fastunwind.x."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target == "fastunwind" or target.startswith("fastunwind."))
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    known = set(modules) | {"fastunwind._core"}
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def test_every_module_has_a_layer() -> None:
    modules = set(package_modules())
    assert modules - set(RANK) == set(), "modules without a place in LAYERS"
    assert set(RANK) - modules - {"fastunwind._core"} == set(), "LAYERS names modules that do not exist"


def test_imports_go_down_the_layers() -> None:
    upward = sorted(f"{name} -> {target}" for name, targets in import_graph().items() for target in targets
                    if RANK.get(target, len(LAYERS) + 1) >= RANK[name])
    assert upward == [], "imports of a module at the same layer or above"


def test_no_import_cycles() -> None:
    graph = import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target] if target in path else [node, target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_native_files_named_in_the_package_exist() -> None:
    repository = PACKAGE.parents[1]
    if not (repository / "native").is_dir():  # an installed package, without the sources
        return
    named = {(path.relative_to(PACKAGE).as_posix(), match)
             for path in sorted(PACKAGE.rglob("*.py*")) if path.suffix in (".py", ".pyi")
             for match in re.findall(r"native/[\w/]+\.(?:c|h|inc)\b", path.read_text())}
    assert sorted((module, name) for module, name in named if not (repository / name).exists()) == []

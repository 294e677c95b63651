"""The native rooms keep their rules (docs/ARCHITECTURE.md, "Rooms" and "Who may include whom"):

- native/core/ is pure C: no Python header, no Python API name;
- native/py/ holds only the bindings: py_core.[ch] (the one shared base), py_module.c (the init
  table) and one py_X.c per Python type or stage, none of which includes another binding's header
  or exports anything but its py_X_init (so no binding calls another);
- core headers include only core headers (and the shipped fu_unwind_abi.h), without cycles, and the
  memory readers sit below the walker (memory.h does not reach walk.h);
- every core source is built into a fuzz driver (native/fuzz/Makefile), so that its entry points run
  under ASAN and UBSAN;
- native/cli/ (the launcher) is C without the Python API, including only its own headers and the
  core's, and its sources are built into a fuzz driver too.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import FUZZ_DIR, REPO_ROOT

CORE = REPO_ROOT / "native" / "core"
BINDINGS = REPO_ROOT / "native" / "py"
LAUNCHER_SOURCES = REPO_ROOT / "native" / "cli"
ABI_HEADER = "fu_unwind_abi.h"

QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
PYTHON_API = re.compile(r'\bPy[A-Z_]\w*|#\s*include\s*[<"]Python\.h[">]')
#: a C string literal but an #include's: names in data (check_scope.c's noreturn CPython functions) are no API use
STRING_LITERAL = re.compile(r'(?<!include )"(?:\\.|[^"\\\n])*"')
#: a function definition's first line at column 0 that is not static: `int py_cfi_init(PyObject *module)`
EXPORTED_FUNCTION = re.compile(r"^(?!static\b|typedef\b|extern\b)[A-Za-z_][\w \*]*?\b(\w+)\([^;\n]*$", re.MULTILINE)


def core_files() -> list[Path]:
    return sorted(p for p in CORE.iterdir() if p.suffix in (".c", ".h", ".inc"))


def includes(path: Path) -> list[str]:
    return QUOTED_INCLUDE.findall(path.read_text())


def python_api(source: str) -> list[str]:
    """The Python API names and includes in C source, outside string literals."""
    return PYTHON_API.findall(STRING_LITERAL.sub('""', source))


def test_core_uses_no_python_api() -> None:
    offenders = {p.name: sorted(set(python_api(p.read_text()))) for p in core_files()}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_bindings_folder_holds_only_bindings() -> None:
    names = sorted(p.name for p in BINDINGS.iterdir() if p.is_file())
    assert [n for n in names if not (re.fullmatch(r"py_\w+\.c", n) or n == "py_core.h")] == []


def test_no_binding_includes_another_bindings_header() -> None:
    for path in sorted(BINDINGS.glob("py_*.c")):
        headers = [h for h in includes(path) if h.startswith("py_") or (BINDINGS / h).exists()]
        assert headers in ([], ["py_core.h"]), f"{path.name} includes {headers}"


def test_bindings_export_only_their_init() -> None:
    for path in sorted(BINDINGS.glob("py_*.c")):
        if path.name in ("py_core.c", "py_module.c"):
            continue  # the shared base (py_core.h declares its functions) and the module's init table
        exported = EXPORTED_FUNCTION.findall(path.read_text())
        assert exported == [f"{path.stem}_init"], f"{path.name} exports {exported}"


def test_core_headers_include_only_core_headers_without_cycles() -> None:
    headers = {p.name: includes(p) for p in CORE.glob("*.h")}
    for name, included in headers.items():
        assert all(h in headers or h == ABI_HEADER for h in included), f"{name} includes {included}"

    def reached(name: str, path: tuple[str, ...] = ()) -> set[str]:
        assert name not in path, f"include cycle: {' -> '.join(path + (name,))}"
        out: set[str] = set()
        for h in headers.get(name, []):
            out |= {h} | reached(h, path + (name,))
        return out

    for name in headers:
        reached(name)
    assert "walk.h" not in reached("memory.h"), "the memory readers must sit below the walker"


def test_every_core_source_is_built_into_a_fuzz_driver() -> None:
    makefile = (FUZZ_DIR / "Makefile").read_text()
    sources = sorted(p.name for p in CORE.glob("*.c"))
    assert [s for s in sources if not re.search(rf"\b{re.escape(s)}\b", makefile)] == []


def test_the_launcher_is_c_over_the_core() -> None:
    files = sorted(LAUNCHER_SOURCES.glob("*.[ch]"))
    assert files
    own = {p.name for p in files}
    for path in files:
        assert python_api(path.read_text()) == [], path.name
        foreign = [h for h in includes(path) if h not in own and not (CORE / h).exists() and h != ABI_HEADER]
        assert foreign == [], f"{path.name} includes {foreign}"
    assert not [h for p in CORE.glob("*.[ch]") for h in includes(p) if h in own], "the core includes the launcher"


def test_every_launcher_source_is_built_into_a_fuzz_driver() -> None:
    makefile = (FUZZ_DIR / "Makefile").read_text()
    # main.c (argv, the exec of the Python CLI) and launcher.c (which verb runs) read no input
    sources = sorted(p.name for p in LAUNCHER_SOURCES.glob("*.c") if p.name not in ("main.c", "launcher.c"))
    assert [s for s in sources if not re.search(rf"\b{re.escape(s)}\b", makefile)] == []

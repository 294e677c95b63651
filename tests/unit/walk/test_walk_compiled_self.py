"""The walker with compiled unwind tables: the current thread's stack walked with backend "compiled"
(eh_elfs, the DWARF interpreter for what they leave), "compiled-only" (eh_elfs alone) and "auto"
(compact tables, eh_elfs for their slow rows) gives the frames the DWARF backend gives, once every
module on the stack has a cached eh_elf."""

from __future__ import annotations

from fastunwind import _core
from fastunwind.tables import eh_elf
from fastunwind.address_space import ImageCache, current_process


def test_the_current_stack_walks_the_same_with_compiled_tables():
    images = ImageCache()
    space = current_process(images)
    (dwarf, _), modules = _core.unwind_self(space.to_core("dwarf"), 256), set()
    dwarf_frames = [(space.mappings[f[1]].path if f[1] is not None else None, f[2], f[3]) for f in dwarf[2]]
    assert dwarf[0] == "end"
    for _ip, module, _kind, _flags in dwarf[2]:
        if module is not None and space.mappings[module].image is not None:
            modules.add(space.mappings[module].path)
    results = eh_elf.compile_images([images.get(path) for path in sorted(modules)])
    assert not [r for r in results if isinstance(r, Exception)], results
    space = current_process(ImageCache())  # fresh images: they load the eh_elfs just cached
    assert all(m.image.compiled is not None for m in space.mappings if m.path in modules)
    for backend in ("compiled", "compiled-only", "auto"):
        walked, _ = _core.unwind_self(space.to_core(backend), 256)
        assert walked[0] == "end", backend
        # module indices change (the eh_elfs are mapped now): compare paths; frame 0 is inside
        # unwind_self, at another instruction each call
        frames = [(space.mappings[f[1]].path if f[1] is not None else None, f[2], f[3]) for f in walked[2]]
        assert frames == dwarf_frames, backend
        assert [f[0] for f in walked[2][1:]] == [f[0] for f in dwarf[2][1:]], backend

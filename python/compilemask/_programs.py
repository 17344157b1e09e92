"""The bundled mask programs (the examples/*.mask files shipped in compilemask/programs),
compiled once per process: what every cm.masks helper binds."""
from __future__ import annotations

import atexit
import functools
from importlib import resources

from ._mask import Mask, compile_text


@functools.lru_cache(maxsize=None)
def program(name: str) -> Mask:
    """The bundled program `name` (e.g. "causal", "hstu"), compiled once per process."""
    path = resources.files(__package__) / "programs" / f"{name}.mask"
    if not path.is_file():
        raise ValueError(f"no bundled mask program '{name}' (available: {', '.join(names())})")
    return compile_text(path.read_text(), f"{name}.mask")


# The compiled programs go at exit, before the extension module: nanobind reports objects that
# outlive it as leaks, and where the interpreter tears the cache down late (a pytest session
# whose conftest imports compilemask, on Python 3.12) all eight did.
atexit.register(program.cache_clear)


def names() -> list[str]:
    """The names of the bundled programs."""
    folder = resources.files(__package__) / "programs"
    return sorted(p.name[: -len(".mask")] for p in folder.iterdir() if p.name.endswith(".mask"))

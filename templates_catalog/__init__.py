"""The model catalog as package data: one JSON entry per model family.

`names()` lists the entries, `path(name)` is where an entry's file is (inside the installed
package, or the repository), `load(name)` reads it. Nothing here needs the compiler: the
CLI's parse commands and the serving plugins read entries through this module.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

# Entry names are lowercase identifiers: they are also module names under generated/.
ENTRY_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _root() -> Path:
    return Path(str(resources.files(__name__)))


def names() -> list[str]:
    """Every catalog entry, sorted."""
    return sorted(path.stem for path in _root().glob("*.json") if ENTRY_NAME.fullmatch(path.stem))


def path(name: str) -> Path:
    """The file of entry `name` (which need not exist)."""
    if not ENTRY_NAME.fullmatch(name):
        raise ValueError(f"catalog entry names are lowercase identifiers, got {name!r}")
    return _root() / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    """Entry `name`, as data. Raises KeyError naming the known entries when there is none."""
    file = path(name)
    if not file.is_file():
        raise KeyError(f"no catalog entry {name!r}; known entries: {', '.join(names())}")
    data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    return data

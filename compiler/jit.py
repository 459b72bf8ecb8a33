"""Compile a template to source, or all the way to a Parser class in this process.

`compile_source` is the whole pipeline (load, validate, automaton, render, black,
ast check). `load_parser` compiles just in time and caches the class by template hash;
its source is registered with `linecache` under a stable name, so tracebacks and pdb
show the generated lines.

The cache holds the `CACHE_SIZE` most recently used classes; evicting one also drops its
`linecache` entry. Threads that ask for the same template at once get one class: building
happens under a lock (it takes milliseconds; a cache hit takes the lock only briefly).
"""

from __future__ import annotations

import linecache
import re
import threading
import types
from collections import OrderedDict
from typing import Any

from .emit import check_source, format_source, render
from .spec import build_template, read_template, template_sha256

# Classes compiled just in time and their linecache file names, by template hash, least
# recently used first.
CACHE_SIZE = 128
_CACHE: OrderedDict[str, tuple[type[Any], str]] = OrderedDict()
_LOCK = threading.Lock()
_LABEL = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def compile_source(
    template: Any,
    name: str = "template",
    *,
    source: str | None = None,
    regenerate: str | None = None,
    format: bool = True,
) -> str:
    """Python source of the parser module for `template`.

    `template`: a template dict, a catalog entry or tokenizer config dict, or a JSON path.
    `source` names the template in the provenance header; `regenerate` is the command
    the header tells readers to run. `format=False` skips black (the JIT does).
    """
    spec, label = read_template(template)
    ir = build_template(spec, source=source or label)
    text = render(ir, source=source or label or f"<{name}>", regenerate=regenerate)
    if format:
        text = format_source(text)
    check_source(text, source or name)
    return text


def load_parser(template: Any, *, name: str = "jit") -> type[Any]:
    """The compiled Parser class for `template`, built once per template hash."""
    spec, _ = read_template(template)
    key = template_sha256(spec)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached[0]
        _CACHE[key] = built = _build(spec, key, name)
        while len(_CACHE) > CACHE_SIZE:
            _, (_, filename) = _CACHE.popitem(last=False)
            linecache.cache.pop(filename, None)
        return built[0]


def _build(spec: Any, key: str, name: str) -> tuple[type[Any], str]:
    """Compile and execute the module; return its Parser class and linecache file name."""
    label = name if _LABEL.fullmatch(name) else "jit"
    filename = f"<response-template {label} sha256:{key[:16]}>"
    text = compile_source(spec, label, source=filename, format=False)
    module = types.ModuleType(f"response_template_{key[:16]}")
    module.__file__ = filename
    exec(compile(text, filename, "exec"), module.__dict__)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    parser: type[Any] = module.Parser
    return parser, filename

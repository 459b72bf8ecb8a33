"""Compile a template to source, or all the way to a Parser class in this process.

`compile_source` is the whole pipeline (load, validate, automaton, render, black,
ast check). `load_parser` compiles just in time and caches the class by template hash;
its source is registered with `linecache` under a stable name, so tracebacks and pdb
show the generated lines.
"""

from __future__ import annotations

import linecache
import re
import types
from typing import Any

from .emit import check_source, format_source, render
from .spec import build_template, read_template, template_sha256

_CACHE: dict[str, type[Any]] = {}
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
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    label = name if _LABEL.fullmatch(name) else "jit"
    filename = f"<response-template {label} sha256:{key[:16]}>"
    text = compile_source(spec, label, source=filename, format=False)
    module = types.ModuleType(f"response_template_{key[:16]}")
    module.__file__ = filename
    exec(compile(text, filename, "exec"), module.__dict__)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    parser: type[Any] = module.Parser
    _CACHE[key] = parser
    return parser

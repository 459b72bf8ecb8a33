"""Compile transformers response templates into standalone streaming parser modules.

    spec (load + validate) -> ir -> automaton -> emit (Jinja2 + black) -> module

Ahead of time: `python -m compiler compile NAME` writes generated/NAME.py from
templates_catalog/NAME.json. Just in time: `load_parser(template)` compiles, caches and
returns the Parser class; `compile_source(template, name)` returns the module source.
"""

__version__ = "0.1.0"

from .errors import TemplateError, TemplateTypeError
from .jit import compile_source, load_parser

__all__ = ["TemplateError", "TemplateTypeError", "__version__", "compile_source", "load_parser"]

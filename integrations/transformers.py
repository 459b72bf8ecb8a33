"""Compiled response parsers behind a transformers tokenizer's own parsing API.

    from integrations.transformers import parse_response, get_response_parser, install

    message = parse_response(tokenizer, output_ids, prefix=prompt_ids)
    stream = get_response_parser(tokenizer, prefix=prompt_text)
    install(tokenizer)     # tokenizer.parse_response / get_response_parser now use them too
    uninstall(tokenizer)   # back to transformers' interpreter

The functions accept what `PreTrainedTokenizerBase.parse_response` and `.get_response_parser`
accept in transformers 5.23.0 and return what they return; misuse raises the same exception
classes. The parser is the one compiled from the tokenizer's `response_template`: the catalog
module in `generated/` whose TEMPLATE has the same hash, when there is one, else a class
compiled just in time (`compiler.load_parser`, cached by hash).

Inputs, as in transformers:
- `response`: a string; a list or tuple of strings (a batch); anything else is token ids,
  decoded with `tokenizer.decode(ids)` (default arguments, special tokens kept), which
  returns a string (one sequence: a list of ids, a 1-D array or tensor, an int) or a list
  of strings (a batch: a list of id lists, a 2-D array or tensor).
- `prefix` (required; "" or [] opts out): a string; an empty list or tuple (""); a list or
  tuple of strings (one per response); anything else is decoded the same way. A single
  prefix is used for every response of a batch, a batch of prefixes must match it in length.
  `get_response_parser` takes one sequence only.

Arrays and tensors are turned into Python lists with their `tolist()` before decoding, so
torch tensors (and other array types) work without this module importing torch. A template
given as a transformers `ResponseTemplate` object, not a dict, cannot be compiled: it is
handed to transformers' own `ResponseParser`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import generated
from compiler import TemplateError, load_parser
from compiler.spec import build_template, template_sha256

__all__ = [
    "get_response_parser",
    "install",
    "is_installed",
    "parse_response",
    "parser_class",
    "uninstall",
]

Tools = Iterable[dict[str, Any] | Callable[..., Any]] | None

_lock = threading.Lock()
_by_hash: dict[str, str] | None = None  # template hash -> generated module name
_resolved: dict[str, type[Any]] = {}  # full template hash -> Parser class


# -- finding the parser --------------------------------------------------------------


def _catalog_modules() -> dict[str, str]:
    """Template hash -> the generated module compiled from it, from the package's index
    (generated.MODULES; an alias's hash maps to the module it re-exports)."""
    global _by_hash
    if _by_hash is None:
        _by_hash = {
            key: name for name, key in generated.MODULES.items() if name not in generated.ALIASES
        }
    return _by_hash


def _catalog_parser(key: str) -> type[Any] | None:
    """The Parser of the generated module compiled from the template with hash `key`, if any."""
    name = _catalog_modules().get(key)
    if name is None:
        return None
    parser: type[Any] = importlib.import_module(f"{generated.__name__}.{name}").Parser
    return parser


def parser_class(template: Any) -> type[Any]:
    """The compiled Parser class for a response template dict.

    The catalog module with the same template hash when there is one (imported on first
    use), else `compiler.load_parser(template)`. Resolved once per template hash. An invalid
    template raises `compiler.TemplateError` (a ValueError), as transformers raises ValueError.
    """
    if not isinstance(template, dict) or "response_template" in template:
        # load_parser would read a string as a file path and unwrap a "response_template"
        # key; as a template, each is invalid, and build_template says why.
        build_template(template)
        raise TemplateError("", f"not a response template: {template!r:.80}")
    try:
        key: str | None = template_sha256(template)
    except (TypeError, ValueError):
        key = None  # not JSON (NaN, odd types): the compiler reports it
    if key is not None:
        cached = _resolved.get(key)
        if cached is not None:
            return cached
    with _lock:
        parser = _catalog_parser(key) if key is not None else None
        if parser is None:
            parser = load_parser(template)
        if key is not None:
            _resolved[key] = parser
    return parser


def _factory(template: Any) -> Callable[..., Any]:
    """Something to call as `factory(prefix, tools=tools)` for a streaming parser."""
    if not isinstance(template, dict):
        reference = _reference_template_type()
        if reference is not None and isinstance(template, reference):
            from transformers.utils.chat_parsing import ResponseParser

            return partial(ResponseParser, template)
    return parser_class(template)


def _reference_template_type() -> type[Any] | None:
    """transformers' ResponseTemplate class, if loaded (if not, no instance can exist)."""
    module = sys.modules.get("transformers.utils.chat_parsing.response_templates")
    return getattr(module, "ResponseTemplate", None)


def _template(tokenizer: Any, response_template: Any, what: str) -> Any:
    if response_template is not None:
        return response_template
    template = getattr(tokenizer, "response_template", None)
    if template is None:
        raise AttributeError(
            f"{what}: the tokenizer has no response_template; set tokenizer.response_template "
            "or pass a template explicitly."
        )
    return template


# -- inputs --------------------------------------------------------------------------


def _plain(ids: Any) -> Any:
    """Arrays and tensors (anything with `tolist()`) as Python lists, for `decode`."""
    if isinstance(ids, (str, bytes, int, float, dict)):
        return ids
    if isinstance(ids, (list, tuple)):
        if any(_has_tolist(item) for item in ids):
            return [_plain(item) for item in ids]
        return ids
    if _has_tolist(ids):
        return ids.tolist()
    return ids


def _has_tolist(value: Any) -> bool:
    return not isinstance(value, (str, bytes, list, tuple)) and callable(
        getattr(value, "tolist", None)
    )


def _texts(tokenizer: Any, value: Any) -> tuple[list[Any], bool]:
    """(texts, batched) for a response, as transformers classifies it."""
    if isinstance(value, str):
        return [value], False
    if isinstance(value, (list, tuple)) and (not value or isinstance(value[0], str)):
        return list(value), True
    decoded = tokenizer.decode(_plain(value))
    if isinstance(decoded, str):
        return [decoded], False
    return list(decoded), True


def _prefix_texts(tokenizer: Any, prefix: Any) -> tuple[list[Any], bool]:
    """(texts, batched) for a prefix: like a response, but an empty list means ""."""
    if isinstance(prefix, (list, tuple)) and not prefix:
        return [""], False
    return _texts(tokenizer, prefix)


_NO_PREFIX = (
    "prefix= is required: it is the prompt the model continued, and chat templates often "
    "write the start of the assistant message there (an opening <think>, a prefill), which "
    'the parser has to see. Pass prefix="" (or []) when the output holds the whole message.'
)


# -- the API -------------------------------------------------------------------------


def parse_response(
    tokenizer: Any,
    response: Any,
    *,
    prefix: Any = None,
    tools: Tools = None,
    response_template: Any = None,
) -> dict[str, Any] | list[dict[str, Any]]:
    """Parse generated output into a message dict (a list of them for a batch).

    `tokenizer.parse_response(response, prefix=prefix, tools=tools)` with a compiled parser.
    `response_template` overrides the tokenizer's template (transformers calls it `schema`).
    """
    template = _template(tokenizer, response_template, "parse_response")
    if prefix is None:
        raise ValueError(_NO_PREFIX)
    texts, batched = _texts(tokenizer, response)
    prefixes, prefix_batched = _prefix_texts(tokenizer, prefix)
    if not prefix_batched:
        prefixes = prefixes * len(texts)
    elif len(prefixes) != len(texts):
        raise ValueError(
            f"{len(texts)} response(s) and {len(prefixes)} prefix(es): give one prefix for all "
            "responses, or one per response."
        )
    messages = []
    if texts:
        factory = _factory(template)
        for text, text_prefix in zip(texts, prefixes, strict=True):
            parser = factory(text_prefix, tools=tools)
            parser.feed(text)
            messages.append(parser.finalize()[0])
    return messages if batched else messages[0]


def get_response_parser(
    tokenizer: Any,
    *,
    prefix: Any = None,
    tools: Tools = None,
    response_template: Any = None,
) -> Any:
    """A streaming parser (`initial_events`, `feed(text)`, `finalize()`) for one sequence.

    `tokenizer.get_response_parser(prefix=prefix, tools=tools)` with a compiled parser: the
    result is an instance of the compiled Parser class.
    """
    template = _template(tokenizer, response_template, "get_response_parser")
    if prefix is not None and not isinstance(prefix, str):
        prefix = tokenizer.decode(_plain(prefix))
        if not isinstance(prefix, str):
            raise ValueError(
                "get_response_parser parses one sequence: prefix= must be a string or one "
                "sequence of token ids, not a batch."
            )
    return _factory(template)(prefix, tools=tools)


# -- installing into a tokenizer -------------------------------------------------------


def _tokenizer_parse_response(
    tokenizer: Any,
    response: Any,
    schema: Any = None,
    *,
    prefix: Any = None,
    tools: Tools = None,
) -> Any:
    return parse_response(tokenizer, response, prefix=prefix, tools=tools, response_template=schema)


def _tokenizer_get_response_parser(
    tokenizer: Any,
    response_template: Any = None,
    *,
    prefix: Any = None,
    tools: Tools = None,
) -> Any:
    return get_response_parser(
        tokenizer, prefix=prefix, tools=tools, response_template=response_template
    )


_METHODS: dict[str, Callable[..., Any]] = {
    "parse_response": _tokenizer_parse_response,
    "get_response_parser": _tokenizer_get_response_parser,
}


class _Installed:
    """A tokenizer method replaced by `install`: calls the compiled path with the tokenizer.

    Kept in the tokenizer's instance dict, so it shadows the class's method; `previous` is
    what that dict held before (None: nothing). Pickles and deep-copies with the tokenizer.
    """

    __slots__ = ("name", "previous", "tokenizer")

    def __init__(self, tokenizer: Any, name: str, previous: Any) -> None:
        self.tokenizer = tokenizer
        self.name = name
        self.previous = previous

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _METHODS[self.name](self.tokenizer, *args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        signature = inspect.signature(_METHODS[self.name])
        return signature.replace(parameters=list(signature.parameters.values())[1:])

    def __repr__(self) -> str:
        return (
            f"<compiled {self.name} of {type(self.tokenizer).__name__} "
            f"at {id(self.tokenizer):#x} (integrations.transformers.install)>"
        )


def install(tokenizer: Any) -> Any:
    """Make `tokenizer.parse_response` and `tokenizer.get_response_parser` use compiled parsers.

    Same signatures as transformers' methods: `parse_response(response, schema=None, *,
    prefix=None, tools=None)` and `get_response_parser(response_template=None, *,
    prefix=None, tools=None)`. Only this tokenizer object changes (its instance dict); the
    class is untouched. Installing twice changes nothing. Returns the tokenizer. Deep copies
    and pickles of the tokenizer stay installed; a shallow copy (`copy.copy`) still parses
    with the original's template until `install` is called on it.

    To undo: `uninstall(tokenizer)`, which restores whatever the instance had before (for a
    plain tokenizer, `del tokenizer.parse_response, tokenizer.get_response_parser` does the
    same).
    """
    for name in _METHODS:
        current = vars(tokenizer).get(name)
        if isinstance(current, _Installed):  # installed before (maybe on an object copied here)
            current = current.previous
        setattr(tokenizer, name, _Installed(tokenizer, name, current))
    return tokenizer


def uninstall(tokenizer: Any) -> Any:
    """Undo `install`: the tokenizer's methods are transformers' own again. Returns it."""
    for name in _METHODS:
        current = vars(tokenizer).get(name)
        if not isinstance(current, _Installed):
            continue
        if current.previous is None:
            delattr(tokenizer, name)
        else:
            setattr(tokenizer, name, current.previous)
    return tokenizer


def is_installed(tokenizer: Any) -> bool:
    """Whether `install(tokenizer)` is in effect."""
    attributes = vars(tokenizer)
    return all(
        isinstance(attributes.get(name), _Installed) and attributes[name].tokenizer is tokenizer
        for name in _METHODS
    )

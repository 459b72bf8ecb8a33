"""integrations.transformers: compiled parsers behind a real transformers tokenizer.

The tokenizer is built here, offline, with the `tokenizers` library: a byte-level BPE trained
on the test texts, whose vocabulary holds SmolLM3's special tokens, wrapped in
`PreTrainedTokenizerFast` and given the catalog's smollm3 response template. Every result is
compared with transformers' own `tokenizer.parse_response` / `get_response_parser` (called on
the class, so `install` cannot reroute them), exceptions by class.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import pickle
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import transformers.tokenization_utils_base as tokenization_base
from offline_tokenizer import SMOLLM3, SPECIAL_TOKENS, smollm3_tokenizer
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_parsing.response_templates import load_response_template

import generated.smollm3
import integrations.transformers as integration
from compiler import TemplateError, load_parser
from compiler.catalog import ROOT, entry_names
from compiler.spec import template_sha256

# Not in the catalog: smollm3 as transformers first shipped it (literal closes).
JIT_TEMPLATE = copy.deepcopy(SMOLLM3)
JIT_TEMPLATE["fields"]["tool_calls"].pop("close_pattern")
JIT_TEMPLATE["fields"]["tool_calls"]["close"] = "</tool_call>"
JIT_TEMPLATE["fields"]["content"] = {"close": "<|im_end|>", "content": "text"}

CHAT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
)
PROMPT = CHAT + "<|im_start|>assistant\n"
PROMPT_THINKING = PROMPT + "<think>\n"
PROMPT_NO_THINK = PROMPT + "<think>\n\n</think>\n"
PREFIXES = [PROMPT, PROMPT_THINKING, PROMPT_NO_THINK, ""]

ANSWER = "<think>\nThe user wants the weather.\n</think>\nIt is sunny in Paris.<|im_end|>"
CONTINUED = "The user wants the weather.\n</think>\nIt is sunny in Paris.<|im_end|>"
TOOL_CALLS = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n'
    '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"city": "Paris"}}\n'
    "</tool_call><|im_end|>\nleftover"
)
PLAIN = "It is sunny in Paris.<|im_end|>"
UNFINISHED = "It is sunny in"
TRUNCATED_CALL = '<tool_call>\n{"name": "get_weather", "argu'  # finalize raises ValueError
OUTPUTS = [ANSWER, CONTINUED, TOOL_CALLS, PLAIN, UNFINISHED, TRUNCATED_CALL, ""]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


# -- the tokenizer ---------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def offline() -> Iterator[None]:
    """No network while these tests run: any connection attempt fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("network access attempted")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        yield


@pytest.fixture(scope="module")
def tokenizer(offline: None) -> PreTrainedTokenizerFast:
    return smollm3_tokenizer([*PREFIXES, *OUTPUTS])


@pytest.fixture
def tok(tokenizer: PreTrainedTokenizerFast) -> Iterator[PreTrainedTokenizerFast]:
    """The shared tokenizer, with its template and methods reset after each test."""
    yield tokenizer
    integration.uninstall(tokenizer)
    tokenizer.response_template = copy.deepcopy(SMOLLM3)


def ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_the_tokenizer_round_trips_and_knows_the_special_tokens(tokenizer: Any) -> None:
    for token in SPECIAL_TOKENS:
        assert ids(tokenizer, token) == [tokenizer.convert_tokens_to_ids(token)]
    for text in [*PREFIXES, *OUTPUTS]:
        assert tokenizer.decode(ids(tokenizer, text)) == text


# -- helpers -------------------------------------------------------------------------------


def reference_parse(tokenizer: Any, *args: Any, **kwargs: Any) -> Any:
    """transformers' own method, even when `install` has shadowed it on the instance."""
    return type(tokenizer).parse_response(tokenizer, *args, **kwargs)


def reference_stream(tokenizer: Any, *args: Any, **kwargs: Any) -> Any:
    return type(tokenizer).get_response_parser(tokenizer, *args, **kwargs)


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except Exception as error:
        return ("error", type(error))


def assert_same(ours: Callable[[], Any], reference: Callable[[], Any]) -> Any:
    """Same value, or exceptions of the same class (ours may be a subclass)."""
    expected, got = outcome(reference), outcome(ours)
    if expected[0] == "error":
        assert got[0] == "error", f"reference raised {expected[1].__name__}, we returned {got[1]!r}"
        assert issubclass(got[1], expected[1]), (got[1], expected[1])
    else:
        assert got == expected
    return got[1]


@contextlib.contextmanager
def reference_blocked() -> Iterator[None]:
    """Make transformers' interpreter unusable from the tokenizer's methods."""

    def blocked(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("transformers' interpreter was used")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenization_base, "_template_parse_response", blocked)
        patch.setattr(tokenization_base, "ResponseParser", blocked)
        yield


def trace(parser: Any, chunks: list[str]) -> list[Any]:
    """Everything a streaming caller observes."""
    seen: list[Any] = [("ok", list(parser.initial_events))]
    for chunk in chunks:
        seen.append(outcome(lambda chunk=chunk: parser.feed(chunk)))
    seen.append(outcome(parser.finalize))
    seen.append(outcome(lambda: parser.feed("more")))
    return seen


def assert_same_trace(ours: Any, reference: Any, chunks: list[str]) -> None:
    """Same events and results; exceptions of the same class (ours may be a subclass)."""
    got, expected = trace(ours, chunks), trace(reference, chunks)
    assert len(got) == len(expected)
    for step, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        if theirs[0] == "error":
            assert mine[0] == "error" and issubclass(mine[1], theirs[1]), (step, mine, theirs)
        else:
            assert mine == theirs, step


class FakeTensor:
    """Duck-typed stand-in for a torch tensor (torch is not installed): only `tolist()`."""

    def __init__(self, data: Any) -> None:
        self._data = np.asarray(data)

    def tolist(self) -> Any:
        return self._data.tolist()


# -- finding the parser --------------------------------------------------------------------


def test_catalog_templates_resolve_to_their_generated_modules() -> None:
    for name in entry_names():
        template = json.loads((ROOT / "templates_catalog" / f"{name}.json").read_text())[
            "response_template"
        ]
        parser = integration.parser_class(template)
        module = sys.modules[parser.__module__]
        # Entries with identical templates (glm45 and glm47) share one module: the index's.
        assert parser.__module__ == "generated." + generated.ALIASES.get(name, name)
        assert template_sha256(module.TEMPLATE) == template_sha256(template)
        assert generated.MODULES[name] == template_sha256(template)
    assert integration.parser_class(copy.deepcopy(SMOLLM3)) is generated.smollm3.Parser


def test_other_templates_compile_just_in_time() -> None:
    parser = integration.parser_class(JIT_TEMPLATE)
    assert not parser.__module__.startswith("generated.")
    assert parser is load_parser(JIT_TEMPLATE)  # the JIT's cache
    assert integration.parser_class(copy.deepcopy(JIT_TEMPLATE)) is parser


def test_generated_modules_are_imported_lazily() -> None:
    script = (
        "import sys, json\n"
        "import integrations.transformers as integration\n"
        "template = json.load(open('templates_catalog/qwen3.json'))['response_template']\n"
        "integration.parser_class(template)\n"
        "print(sorted(m for m in sys.modules if m.startswith('generated.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['generated.qwen3']"


# -- parse_response, differential ------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES, ids=["prompt", "thinking", "no_think", "empty"])
@pytest.mark.parametrize("output", OUTPUTS)
def test_strings_and_token_ids(tok: Any, output: str, prefix: str) -> None:
    forms = [
        (output, prefix),
        (ids(tok, output), ids(tok, prefix)),  # an empty prefix is [] here: the opt-out
        (tuple(ids(tok, output)), prefix),
        (np.array(ids(tok, output), dtype=np.int64), np.array(ids(tok, prefix), dtype=np.int64)),
        (output, ids(tok, prefix)),
    ]
    for response, response_prefix in forms:
        assert_same(
            lambda r=response, p=response_prefix: integration.parse_response(tok, r, prefix=p),
            lambda r=response, p=response_prefix: reference_parse(tok, r, prefix=p),
        )
    expected = outcome(lambda: reference_parse(tok, output, prefix=prefix))
    with reference_blocked():
        ours = outcome(
            lambda: integration.parse_response(
                tok, FakeTensor(ids(tok, output)), prefix=FakeTensor(ids(tok, prefix))
            )
        )
    if expected[0] == "ok":
        assert ours == expected
    else:
        assert ours[0] == "error" and issubclass(ours[1], expected[1])


def test_results(tok: Any) -> None:
    with reference_blocked():
        assert integration.parse_response(tok, ids(tok, CONTINUED), prefix=PROMPT_THINKING) == {
            "role": "assistant",
            "thinking": "The user wants the weather.",
            "content": "It is sunny in Paris.",
        }
        message = integration.parse_response(tok, TOOL_CALLS, prefix=PROMPT, tools=TOOLS)
    assert message["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 3}
    assert "content" not in message


def test_tools(tok: Any) -> None:
    for tools in (TOOLS, None, []):
        assert_same(
            lambda t=tools: integration.parse_response(tok, TOOL_CALLS, prefix=PROMPT, tools=t),
            lambda t=tools: reference_parse(tok, TOOL_CALLS, prefix=PROMPT, tools=t),
        )


def test_batches(tok: Any) -> None:
    outputs = [ANSWER, TOOL_CALLS, PLAIN, ""]
    token_batch = [ids(tok, text) for text in outputs]
    prefixes = [PROMPT, PROMPT_NO_THINK, PROMPT_THINKING, ""]
    width = min(len(row) for row in token_batch if row)
    square = np.array([row[:width] for row in token_batch if row])  # truncated, same length
    cases: list[tuple[Any, Any]] = [
        (outputs, PROMPT),  # a list of strings, one prefix for all
        (tuple(outputs), PROMPT),
        (outputs, prefixes),  # one prefix each
        (outputs, [ids(tok, p) for p in prefixes]),
        (token_batch, PROMPT),  # a list of id lists
        (token_batch, ids(tok, PROMPT)),
        (token_batch, prefixes),
        (token_batch, [ids(tok, p) for p in prefixes]),
        ([np.array(row) for row in token_batch], PROMPT),  # a list of arrays
        (square, PROMPT),  # a 2-D array
        (square, np.array([ids(tok, PROMPT)] * len(square))),
        (square, [PROMPT] * len(square)),
        ([ANSWER], [PROMPT]),
        ([], PROMPT),  # an empty batch
        ([], []),
        ([[]], PROMPT),  # one empty sequence of ids
        (outputs, prefixes[:2]),  # counts differ: ValueError
        (token_batch, [[]]),
        ([ANSWER, TRUNCATED_CALL], PROMPT),  # one item fails: the call raises
    ]
    for response, prefix in cases:
        assert_same(
            lambda r=response, p=prefix: integration.parse_response(tok, r, prefix=p),
            lambda r=response, p=prefix: reference_parse(tok, r, prefix=p),
        )


def test_batched_duck_typed_tensors(tok: Any) -> None:
    rows = [ids(tok, ANSWER), ids(tok, ANSWER)]
    expected = reference_parse(tok, np.array(rows), prefix=np.array(ids(tok, PROMPT)))
    assert isinstance(expected, list) and len(expected) == 2
    expected_unprefixed = reference_parse(tok, rows, prefix="")
    with reference_blocked():
        assert integration.parse_response(tok, FakeTensor(rows), prefix=PROMPT) == expected
        ours = integration.parse_response(tok, [FakeTensor(row) for row in rows], prefix="")
    assert ours == expected_unprefixed


# -- get_response_parser, differential ---------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES, ids=["prompt", "thinking", "no_think", "empty"])
@pytest.mark.parametrize("output", [ANSWER, CONTINUED, TOOL_CALLS, TRUNCATED_CALL])
def test_streaming(tok: Any, output: str, prefix: str) -> None:
    chunks = [tok.decode([token]) for token in ids(tok, output)]  # one token at a time
    assert "".join(chunks) == output
    for given in (prefix, ids(tok, prefix), np.array(ids(tok, prefix), dtype=np.int32)):
        ours = integration.get_response_parser(tok, prefix=given, tools=TOOLS)
        assert type(ours) is generated.smollm3.Parser
        reference = reference_stream(tok, prefix=given, tools=TOOLS)
        assert_same_trace(ours, reference, chunks)
    ours = integration.get_response_parser(tok, prefix=FakeTensor(ids(tok, prefix)))
    assert_same_trace(ours, reference_stream(tok, prefix=prefix), chunks)


def test_explicit_templates(tok: Any) -> None:
    for template in (JIT_TEMPLATE, load_response_template(JIT_TEMPLATE)):
        assert_same(
            lambda t=template: integration.parse_response(
                tok, TOOL_CALLS, prefix=PROMPT, response_template=t
            ),
            lambda t=template: reference_parse(tok, TOOL_CALLS, t, prefix=PROMPT),
        )
        chunks = [TOOL_CALLS[:20], TOOL_CALLS[20:]]
        ours = integration.get_response_parser(tok, prefix=PROMPT, response_template=template)
        theirs = reference_stream(tok, template, prefix=PROMPT)
        assert_same_trace(ours, theirs, chunks)
    assert type(
        integration.get_response_parser(tok, prefix="", response_template=JIT_TEMPLATE)
    ) is load_parser(JIT_TEMPLATE)


# -- errors ----------------------------------------------------------------------------------


def test_errors_match_transformers(tok: Any) -> None:
    def both(ours: Callable[[], Any], reference: Callable[[], Any], error: type[Exception]) -> None:
        with pytest.raises(error):
            reference()
        with pytest.raises(error):
            ours()

    # No prefix.
    both(
        lambda: integration.parse_response(tok, ANSWER),
        lambda: reference_parse(tok, ANSWER),
        ValueError,
    )
    both(
        lambda: integration.get_response_parser(tok),
        lambda: reference_stream(tok),
        ValueError,
    )
    # A batch of prefixes for one stream.
    batch = [ids(tok, PROMPT), ids(tok, PROMPT)]
    both(
        lambda: integration.get_response_parser(tok, prefix=batch),
        lambda: reference_stream(tok, prefix=batch),
        ValueError,
    )
    # Invalid templates (a string is not read as a path).
    wrapped = {"response_template": SMOLLM3}
    for bad in ({"fields": {}}, "templates_catalog/smollm3.json", wrapped, [SMOLLM3], 7):
        both(
            lambda b=bad: integration.parse_response(tok, ANSWER, prefix="", response_template=b),
            lambda b=bad: reference_parse(tok, ANSWER, b, prefix=""),
            ValueError,
        )
        both(
            lambda b=bad: integration.get_response_parser(tok, prefix="", response_template=b),
            lambda b=bad: reference_stream(tok, b, prefix=""),
            ValueError,
        )
    with pytest.raises(TemplateError):
        integration.parse_response(tok, ANSWER, prefix="", response_template={"fields": {}})
    # An empty batch is not parsed, so its template is not checked, in either.
    assert integration.parse_response(tok, [], prefix="", response_template={"fields": {}}) == []
    assert reference_parse(tok, [], {"fields": {}}, prefix="") == []
    # No template at all; the prefix is not looked at first.
    tok.response_template = None
    both(
        lambda: integration.parse_response(tok, ANSWER, prefix=""),
        lambda: reference_parse(tok, ANSWER, prefix=""),
        AttributeError,
    )
    both(
        lambda: integration.parse_response(tok, ANSWER),
        lambda: reference_parse(tok, ANSWER),
        AttributeError,
    )
    both(
        lambda: integration.get_response_parser(tok, prefix=""),
        lambda: reference_stream(tok, prefix=""),
        AttributeError,
    )
    integration.install(tok)
    with pytest.raises(AttributeError):
        tok.parse_response(ANSWER, prefix="")
    with pytest.raises(AttributeError):
        tok.get_response_parser(prefix="")


# -- install ---------------------------------------------------------------------------------


def test_install_routes_the_tokenizer_through_compiled_parsers(tok: Any) -> None:
    outputs = [ANSWER, TOOL_CALLS, PLAIN]
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((ANSWER,), {"prefix": PROMPT}),
        ((ids(tok, CONTINUED),), {"prefix": ids(tok, PROMPT_THINKING)}),
        ((np.array(ids(tok, TOOL_CALLS)),), {"prefix": PROMPT, "tools": TOOLS}),
        ((outputs,), {"prefix": PROMPT}),
        (([ids(tok, text) for text in outputs],), {"prefix": [PROMPT, "", PROMPT_NO_THINK]}),
        ((TOOL_CALLS, JIT_TEMPLATE), {"prefix": PROMPT}),  # explicit template: the JIT
        ((TOOL_CALLS,), {"prefix": PROMPT, "tools": TOOLS}),
    ]
    expected = [reference_parse(tok, *args, **kwargs) for args, kwargs in calls]

    assert integration.install(tok) is tok
    assert integration.is_installed(tok)
    with reference_blocked():
        assert [tok.parse_response(*args, **kwargs) for args, kwargs in calls] == expected
        stream = tok.get_response_parser(prefix=ids(tok, PROMPT_THINKING))
        assert type(stream) is generated.smollm3.Parser
        stream.feed(CONTINUED)
        assert stream.finalize()[0] == expected[1]
        jit = tok.get_response_parser(JIT_TEMPLATE, prefix="")
        assert type(jit) is load_parser(JIT_TEMPLATE)
        tok.response_template = copy.deepcopy(JIT_TEMPLATE)
        assert type(tok.get_response_parser(prefix="")) is load_parser(JIT_TEMPLATE)
        with pytest.raises(ValueError):
            tok.get_response_parser()

    assert integration.install(tok) is tok  # twice: no change
    assert integration.uninstall(tok) is tok
    assert not integration.is_installed(tok)
    assert "parse_response" not in vars(tok) and "get_response_parser" not in vars(tok)
    with reference_blocked(), pytest.raises(AssertionError, match="interpreter was used"):
        tok.parse_response(ANSWER, prefix="")


def test_installed_methods_have_the_original_signatures(tok: Any) -> None:
    integration.install(tok)
    for name in ("parse_response", "get_response_parser"):
        original = list(inspect.signature(getattr(type(tok), name)).parameters.values())[1:]
        installed = list(inspect.signature(getattr(tok, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in installed] == [
            (p.name, p.kind, p.default) for p in original
        ]


def test_install_keeps_an_earlier_instance_override(tok: Any) -> None:
    def custom(*args: Any, **kwargs: Any) -> str:
        return "custom"

    tok.parse_response = custom
    try:
        integration.install(tok)
        assert isinstance(tok.parse_response(ANSWER, prefix=""), dict)
        integration.uninstall(tok)
        assert tok.parse_response(ANSWER, prefix="") == "custom"
    finally:
        del tok.parse_response


def test_copies_of_an_installed_tokenizer(tok: Any) -> None:
    integration.install(tok)
    for clone in (copy.deepcopy(tok), pickle.loads(pickle.dumps(tok))):
        assert integration.is_installed(clone)
        clone.response_template = copy.deepcopy(JIT_TEMPLATE)
        assert type(clone.get_response_parser(prefix="")) is load_parser(JIT_TEMPLATE)
        assert type(tok.get_response_parser(prefix="")) is generated.smollm3.Parser
        assert clone.parse_response(TOOL_CALLS, prefix=PROMPT) == reference_parse(
            clone, TOOL_CALLS, prefix=PROMPT
        )
    shallow = copy.copy(tok)
    assert not integration.is_installed(shallow)  # bound to the original until installed
    integration.install(shallow)
    assert integration.is_installed(shallow) and integration.is_installed(tok)

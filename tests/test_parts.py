"""The registry of template parts (compiler.parts) is the single source of what a template
can name: the spec accepts exactly its names, every runtime function it names exists and
is exported, its schemas are what lowering reads and what strict checking enforces, and
an extension is added by one entry plus one runtime function.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import chunkings

import runtime
from compiler import compile_source, load_parser, parts
from compiler.errors import TemplateError
from compiler.spec import build_template, uses_extensions

ROOT = Path(__file__).resolve().parent.parent
ALL_PARTS: list[Any] = [
    *parts.CONTENT.values(),
    *parts.OPERATIONS.values(),
    *parts.STORAGE.values(),
]
# A value of each JSON type, to try where an argument wants another.
JSON_VALUES = [True, 3, 2.5, "s", [], {}, None]


def field_template(field: dict[str, Any]) -> dict[str, Any]:
    return {"start_anchor": "A", "fields": {"t": {"open": "[", "close": "]", **field}}}


def required_args(part: parts.ContentPart) -> dict[str, Any]:
    """The least arguments an extension content parser accepts."""
    samples = {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</\1>", "pattern": r"<b>"}
    return {key: samples[key] for key, arg in part.args.items() if arg.required}


# -- one entry per name ---------------------------------------------------------------


def test_each_entry_is_keyed_by_its_name_and_names_are_unique() -> None:
    for table in (parts.CONTENT, parts.OPERATIONS, parts.STORAGE):
        assert all(key == entry.name for key, entry in table.items())
    names = [entry.name for entry in ALL_PARTS]
    assert len(names) == len(set(names))


def test_v1_content_parsers_are_the_references() -> None:
    reference = importlib.import_module("transformers.utils.chat_parsing.content_parsers")
    assert parts.v1_content_parsers() == sorted(reference.CONTENT_PARSERS)
    streamable = {name for name, part in parts.CONTENT.items() if part.streamable}
    assert streamable == set(reference.STREAMABLE_PARSERS)


def test_the_extensions_documented_are_the_registered_ones() -> None:
    """README's table and runtime/extensions.py's docstring list every extension entry."""
    registered = {entry.name for entry in ALL_PARTS if entry.extension}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Extensions", 1)[1].split("Rules that keep", 1)[0]
    assert set(re.findall(r'^\| `[{"]*(x-[a-z-]+)', table, re.M)) == registered
    documented = runtime.extensions.__doc__ or ""
    assert set(re.findall(r"`[{\"]*(x-[a-z-]+)", documented)) == registered


@pytest.mark.parametrize("name", sorted(parts.CONTENT))
def test_the_spec_accepts_each_content_parser(name: str) -> None:
    part = parts.CONTENT[name]
    template = field_template({"content": name, "content_args": required_args(part)})
    assert build_template(template).fields[0].plan.part == name  # type: ignore[union-attr]
    assert uses_extensions(template) == ([name] if part.extension else [])


@given(name=st.text(max_size=12).filter(lambda name: name not in parts.CONTENT))
def test_the_spec_refuses_any_other_content_parser(name: str) -> None:
    with pytest.raises(TemplateError, match=r"fields\.t\.content: unknown content parser"):
        build_template(field_template({"content": name}))


@pytest.mark.parametrize("name", sorted(parts.OPERATIONS))
def test_the_spec_accepts_each_operation(name: str) -> None:
    argument = {"value": "{content}", "candidates": ["{content}"], "each": ["{content}", 1]}
    template = field_template(
        {"content": "json", "transform": {name: argument[parts.OPERATIONS[name].form]}}
    )
    assert uses_extensions(template) == [name]
    (operation,) = parts.operations(build_template(template).fields[0].transform)
    assert operation.name == name
    # Any other single-key object is a literal, as in the reference.
    other = field_template({"transform": {name + "x": "{content}"}})
    assert list(parts.operations(build_template(other).fields[0].transform)) == []


@pytest.mark.parametrize("name", sorted(parts.STORAGE))
def test_the_spec_selects_each_storage_mode(name: str) -> None:
    storage = parts.STORAGE[name]
    keys = {"assign": {}, "repeats": {"repeats": True}, "join": {"repeats": True, "join": ","}}
    field = keys.get(name, {storage.key: True})
    assert build_template(field_template(field)).fields[0].storage == name
    assert uses_extensions(field_template(field)) == ([name] if storage.extension else [])


# -- runtime functions ----------------------------------------------------------------


@pytest.mark.parametrize("entry", [e for e in ALL_PARTS if e.imports], ids=lambda e: e.name)
def test_every_runtime_function_exists_where_named(entry: Any) -> None:
    """Generated code imports a part's function from the module its entry names."""
    module = importlib.import_module(entry.module)
    for name in entry.imports:
        assert callable(getattr(module, name)), (entry.name, name)


@pytest.mark.parametrize("name", sorted(parts.CONTENT))
def test_a_module_imports_the_function_of_its_parts(name: str) -> None:
    part = parts.CONTENT[name]
    source = compile_source(
        field_template({"content": name, "content_args": required_args(part)}), format=False
    )
    imported = _imported(source)
    for function in part.imports:
        assert (part.module, function) in imported
        assert re.search(rf"\b{function}\(self\._body\(\)", source), function
    if part.inline is not None:
        assert "self._body()" in source
        assert not {name for _, name in imported} & _content_functions()


def _imported(source: str) -> set[tuple[str, str]]:
    """(module, name) of every `from module import name` of a generated module."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found |= {(node.module, alias.name) for alias in node.names}
    return found


PLAIN_CALLS = sorted(
    name for name, part in parts.CONTENT.items() if part.extension and part.lower is None
)
ARG_VALUES = {
    bool: st.booleans(),
    list: st.lists(st.text("ab,;", min_size=1, max_size=3), max_size=3),
    int: st.integers(-3, 3),
}


@given(data=st.data(), name=st.sampled_from(PLAIN_CALLS))
def test_a_call_passes_exactly_the_arguments_that_differ_from_the_default(
    data: Any, name: str
) -> None:
    part = parts.CONTENT[name]
    args = required_args(part)
    for key, arg in part.args.items():
        if arg.types in ARG_VALUES and data.draw(st.booleans()):
            args[key] = data.draw(ARG_VALUES[arg.types])  # type: ignore[index]
    template = field_template({"content": name, "content_args": args})
    tree = ast.parse(compile_source(template, format=False))
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == part.function
    ]
    passed = {keyword.arg: keyword.value for keyword in call.keywords}
    keywords = {p.keyword: p.attribute for p in parts.call_params(part) if p.keyword}
    assert set(passed) == {
        keyword
        for keyword, key in keywords.items()
        if key in args and _frozen(args[key]) != part.args[key].default
    }
    for keyword, node in passed.items():
        assert ast.literal_eval(node) == _frozen(args[keywords[keyword]])


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _content_functions() -> set[str]:
    return {part.function for part in parts.CONTENT.values() if part.function}


@pytest.mark.parametrize(
    ("name", "field", "expected"),
    [
        ("assign", {}, "{bad"),
        ("repeats", {"repeats": True}, [["1"], "{bad"]),
        ("join", {"repeats": True, "join": "+"}, "1+{bad"),
        ("x-extend", {"x-extend": True}, ["1", "{bad"]),
    ],
)
def test_each_storage_mode_stores_raw_text_as_its_entry_says(
    name: str, field: dict[str, Any], expected: Any
) -> None:
    """on_error="keep_raw": a region that does not parse is stored by the entry's raw_store."""
    template = {
        "start_anchor": "A",
        "fields": {"t": {"open": "<t>", "close": "</t>", "content": "json", **field}},
    }
    assert build_template(template).fields[0].storage == name
    raw_store = parts.STORAGE[name].raw_store
    source = compile_source(template, format=False)
    assert (f"store={raw_store!r}," in source) == (raw_store != "assign")
    body = '"1"' if name == "join" else '["1"]'
    message = load_parser(template).parse(
        f"<t>{body}</t><t>{{bad</t>", prefix="", on_error="keep_raw"
    )
    assert message["t"] == expected
    assert [error["raw"] for error in message["parse_errors"]] == ["{bad"]


# -- argument schemas -----------------------------------------------------------------


class Recording(dict):  # type: ignore[type-arg]
    """content_args that record every key lowering reads."""

    read: set[str]

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.read.add(key)
        return super().__contains__(key)


@pytest.mark.parametrize("name", sorted(parts.CONTENT))
def test_lowering_reads_only_the_keys_of_the_schema(name: str) -> None:
    part = parts.CONTENT[name]
    args = Recording(required_args(part))
    args.read = set()
    parts.lower_content(name, args, "content_args")
    assert args.read <= set(part.args), sorted(args.read - set(part.args))


EXTENSION_CONTENT = sorted(name for name, part in parts.CONTENT.items() if part.extension)


@pytest.mark.parametrize("name", EXTENSION_CONTENT)
def test_extension_arguments_are_checked_against_the_schema(name: str) -> None:
    part = parts.CONTENT[name]
    base = required_args(part)

    def refused(args: Any, where: str, message: str) -> None:
        template = field_template({"content": name, "content_args": args})
        with pytest.raises(TemplateError, match=re.escape(f"fields.t.content_args{where}: ")):
            build_template(template)
        try:
            build_template(template)
        except TemplateError as error:
            assert message in str(error)

    refused([], "", "must be an object")
    refused({**base, "nope": 1}, ".nope", f"not an argument of {name}")
    for key, arg in part.args.items():
        for value in JSON_VALUES:
            if not arg.accepts(value):
                refused({**base, key: value}, f".{key}", f"must be a {arg.type_name}")
        if arg.required:
            refused({k: v for k, v in base.items() if k != key}, f".{key}", f"required by {name}")


def test_v1_arguments_stay_lenient() -> None:
    """A v1 parser's malformed arguments load, and fail where the reference fails: at close."""
    for name in parts.v1_content_parsers():
        template = field_template({"content": name, "content_args": {"nope": [1], "strip": 0}})
        build_template(template)
    parser = load_parser(field_template({"content": "json", "content_args": []}))
    with pytest.raises(AttributeError):
        parser.parse("[1]", prefix="")


# -- adding an extension: one entry and one function --------------------------------------


def shout(text: str, *, mark: str = "!", times: int = 1) -> str:
    """The toy content parser: the text, upper-cased, with `mark` `times` times."""
    if "!" in text:
        raise ValueError("x-shout: already shouted")
    return text.strip().upper() + mark * times


def reverse_words(value: Any) -> Any:
    """The toy operation."""
    return " ".join(reversed(value.split())) if isinstance(value, str) else value


def keep_longest(previous: Any, value: Any, field: str) -> str:
    """The toy storage mode: the longest value so far."""
    if not isinstance(value, str) or "#" in value:
        raise ValueError(f"Field {field!r}: x-longest needs strings without '#'")
    return value if previous is None or len(value) > len(previous) else previous


@pytest.fixture
def toy_extensions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module = __name__  # the generated code imports the toy functions from here
    monkeypatch.setitem(
        parts.CONTENT,
        "x-shout",
        parts.ContentPart(
            "x-shout",
            {"mark": parts.Arg(str, "!"), "times": parts.Arg(int, 1)},
            function="shout",
            module=module,
        ),
    )
    monkeypatch.setitem(
        parts.OPERATIONS, "x-reverse", parts.OperationPart("x-reverse", "reverse_words", module)
    )
    monkeypatch.setitem(
        parts.STORAGE,
        "x-longest",
        parts.StoragePart(
            "x-longest",
            "x-longest",
            form="call",
            raw_store="assign",
            function="keep_longest",
            module=module,
        ),
    )
    yield


TOY = {
    "start_anchor": "A",
    "fields": {
        "content": {"close": "<eot>"},
        "shouts": {
            "open": "<s>",
            "close": "</s>",
            "content": "x-shout",
            "content_args": {"mark": "?", "times": 2},
            "transform": {"x-reverse": "{content}"},
            "x-longest": True,
        },
    },
}


def test_a_toy_extension_is_one_entry_and_one_function(toy_extensions: None) -> None:
    assert uses_extensions(TOY) == ["x-longest", "x-reverse", "x-shout"]
    source = compile_source(TOY, "toy")
    assert 'content = shout(self._body(), mark="?", times=2)' in source
    assert "value = self._coerce(reverse_words(content))" in source
    assert 'keep_longest(self._output.get("shouts"), value, "shouts")' in source
    parser = load_parser(TOY)
    message = parser.parse("hi <s>a b</s> and <s>c d e</s><s>f</s> bye", prefix="")
    assert message["shouts"] == "E?? D C"  # the longest of "B?? A", "E?? D C", "F??"
    # Defaults are left out of the call; a mistyped argument is refused with its key path.
    default = {**TOY, "fields": {"t": {"open": "<s>", "content": "x-shout"}}}
    assert "shout(self._body())" in compile_source(default, "toy")
    for times in ("2", True):
        bad = {"open": "<s>", "content": "x-shout", "content_args": {"times": times}}
        with pytest.raises(TemplateError, match=r"fields\.t\.content_args\.times: must be a int"):
            build_template(field_template(bad))
    # Lenient mode: the raw text of a region that fails is stored as raw_store says.
    lenient = parser.parse("<s>a</s><s>b!</s>", prefix="", on_error="keep_raw")
    assert lenient["shouts"] == "b!"
    assert [error["raw"] for error in lenient["parse_errors"]] == ["b!"]
    # The source map names the template key of the part that failed.
    assert lenient["parse_errors"][0]["error"]["key"] == "fields.shouts.content"
    with pytest.raises(ValueError, match="x-longest needs strings") as raised:
        parser.parse("<s>#</s>", prefix="")
    assert raised.value.key == "fields.shouts.x-longest"  # type: ignore[attr-defined]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_toy_extension_streams_like_one_shot(toy_extensions: None, data: Any) -> None:
    parser = load_parser(TOY)
    text = data.draw(
        st.lists(st.sampled_from(["ab ", "<s>", "x y", "</s>", "<", "s>", "<eot>"]), max_size=8)
    )
    text = "".join(text)
    try:
        expected = parser.parse(text, prefix="")
    except ValueError:
        return
    stream = parser("")
    for chunk in data.draw(chunkings(text)):
        stream.feed(chunk)
    assert stream.finalize()[0] == expected

"""Parse many generations: the per-record and per-batch functions behind `parse-jsonl`.

Standard library only (plus the generated parsers, which need `regex`); nothing here
imports the compiler, so a worker process or a cluster node needs only the runtime and
`generated/`. Parsers are looked up by catalog name (`generated.NAME`) and cached per
process.

Result records (`parse_record`):

    {"message": {"role": "assistant", ...}}                    # parsed
    {"error": {"type": "ValueError", "message": "..."}}         # a bad record

A bad record (not an object, a missing or non-string field, a parser error) gives an
error record; it never raises. Only a bad configuration raises: an unknown model name
(`UnknownModel`, a LookupError).

For engines that hand over batches:

- `parse_records(records, model=...)`: a list of records in, a list of results out
  (`multiprocessing.Pool.map` over chunks, Spark `mapPartitions`, ...);
- `parse_batch(batch, model=...)`: a columnar batch (a mapping of column name to a
  sequence, as Ray Data's `map_batches` and pandas-style engines pass it) in, the same
  columns plus `message` and `error` out.

`parse_json_line` and `parse_jsonl_chunk` are the JSON-lines layer the CLI runs in its
worker processes: they add the line number to each result (`{"line": 7, "error": ...}`),
and the record's `id` when it has one (`{"line": 7, "id": "a1", "message": ...}`).

For engines that split a file among machines (integrations.ray, integrations.dask):
`plan_blocks` cuts a JSON-lines file into byte ranges that start at line starts,
`count_lines` counts the lines of one, and `parse_block` parses one into the very lines
`parse-jsonl` writes for it, given the number of its first line. Nothing is read twice
but the newline count, and a bad line is an error record, never a failed task.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from .call_arguments import dump_json

__all__ = [
    "Block",
    "ParseBatch",
    "UnknownModel",
    "count_lines",
    "default_prefix",
    "dumps",
    "get_parser",
    "parse_batch",
    "parse_block",
    "parse_json_line",
    "parse_jsonl_chunk",
    "parse_record",
    "parse_records",
    "plan_blocks",
    "result_line",
]

_MODEL_NAME = re.compile(r"[a-z][a-z0-9_]*")  # catalog entry names (compiler.catalog.ENTRY_NAME)
_PARSERS: dict[str, type[Any]] = {}


class UnknownModel(LookupError):
    """No generated parser module has that name."""


def get_parser(model: str) -> type[Any]:
    """The compiled Parser class of catalog entry `model`, imported once per process.

    Raises UnknownModel (a LookupError) when there is no generated module of that name.
    """
    parser = _PARSERS.get(model)
    if parser is not None:
        return parser
    if not isinstance(model, str) or not _MODEL_NAME.fullmatch(model):
        raise UnknownModel(f"not a catalog entry name: {model!r}")
    module_name = f"generated.{model}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name not in (module_name, "generated"):
            raise
        raise UnknownModel(
            f"unknown model {model!r}: no module {module_name} "
            f"(a catalog entry name; `make compile MODEL={model}` builds one in a checkout)"
        ) from None
    parser = module.Parser
    _PARSERS[model] = parser
    return parser


def default_prefix(model: str) -> str | None:
    """The catalog entry's generation_prompt["default"] (None when there is no such entry):
    what `parse-jsonl` uses for records without a prefix, and so do the engines."""
    import templates_catalog

    try:
        prompts = templates_catalog.load(model).get("generation_prompt")
    except (KeyError, ValueError):
        return None
    prompt = prompts.get("default") if isinstance(prompts, dict) else None
    return prompt if isinstance(prompt, str) else None


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


def _missing(value: Any) -> bool:
    """None, a float NaN or pandas' NA: how columnar engines spell a missing value.

    (pandas' NA is recognised by its type name, so that pandas need not be imported.)
    """
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ == "NAType"


def parse_record(
    record: Any,
    *,
    model: str,
    output_field: str = "output",
    prefix_field: str = "prefix",
    tools_field: str | None = None,
    default_prefix: str | None = None,
    regex_timeout: float | None = None,
) -> dict[str, Any]:
    """Parse one record; return {"message": ...} or {"error": {"type", "message"}}.

    `record[output_field]` is the generated text and `record[prefix_field]` the prompt it
    continued. A record without a prefix (field absent or null) uses `default_prefix`;
    when that is None too, the record is an error, since parsers require a prefix. With
    `tools_field`, `record[tools_field]` (a list of tool schemas, or null) casts tool-call
    arguments. `regex_timeout` is the parser's bound on each template-regex search, in
    seconds of CPU time (None: runtime.errors.REGEX_TIMEOUT). Never raises for a bad record;
    raises UnknownModel for an unknown model.
    """
    parser = get_parser(model)
    if not isinstance(record, Mapping):
        return _error("TypeError", f"a record is a JSON object, got {type(record).__name__}")
    if output_field not in record or _missing(record[output_field]):
        return _error("KeyError", f"record has no {output_field!r} field")
    output = record[output_field]
    if not isinstance(output, str):
        return _error(
            "TypeError", f"field {output_field!r} must be a string, got {type(output).__name__}"
        )
    output = str(output)  # a str subclass (numpy.str_) becomes a plain str
    prefix = record.get(prefix_field)
    if _missing(prefix):
        prefix = default_prefix
        if prefix is None:
            return _error("KeyError", f"record has no {prefix_field!r} field (and no default)")
    elif not isinstance(prefix, str):
        return _error(
            "TypeError", f"field {prefix_field!r} must be a string, got {type(prefix).__name__}"
        )
    prefix = str(prefix)
    tools = None
    if tools_field is not None:
        tools = record.get(tools_field)
        if _missing(tools):
            tools = None
        elif not isinstance(tools, (list, tuple)):
            return _error(
                "TypeError",
                f"field {tools_field!r} must be a list of tool schemas, got {type(tools).__name__}",
            )
    try:
        message = parser.parse(output, prefix=prefix, tools=tools, regex_timeout=regex_timeout)
        return {"message": message}
    except Exception as error:  # a parser error is a property of this record
        return _error(type(error).__name__, str(error))


def parse_records(records: Iterable[Any], **options: Any) -> list[dict[str, Any]]:
    """`parse_record` over a list of records (same keyword options); results in order."""
    return [parse_record(record, **options) for record in records]


def parse_batch(
    batch: Mapping[str, Iterable[Any]],
    *,
    model: str,
    output_field: str = "output",
    prefix_field: str = "prefix",
    tools_field: str | None = None,
    default_prefix: str | None = None,
    as_json: bool = False,
) -> dict[str, list[Any]]:
    """Parse a columnar batch: {column: values} in, the same columns plus two out.

    `message` holds each row's message (None on error) and `error` each row's error
    ({"type", "message"}, None when parsed). With `as_json=True` both hold JSON text
    instead of dicts, which suits Arrow-backed engines (Ray Data), whose columns must
    have one type. Column values may be any sequence (lists, numpy arrays, pandas
    Series); a missing column or a null/NaN value is handled like a missing field.
    """
    columns = {name: list(values) for name, values in batch.items()}
    rows = len(next(iter(columns.values()))) if columns else 0
    options: dict[str, Any] = {
        "model": model,
        "output_field": output_field,
        "prefix_field": prefix_field,
        "tools_field": tools_field,
        "default_prefix": default_prefix,
    }
    used = [name for name in (output_field, prefix_field, tools_field) if name in columns]
    messages: list[Any] = []
    errors: list[Any] = []
    for row in range(rows):
        result = parse_record({name: columns[name][row] for name in used}, **options)
        message, error = result.get("message"), result.get("error")
        if as_json:
            message = None if message is None else dumps(message)
            error = None if error is None else dumps(error)
        messages.append(message)
        errors.append(error)
    columns["message"] = messages
    columns["error"] = errors
    return columns


class ParseBatch:
    """`parse_batch` with its options bound: a callable class for engines that map batches.

    Ray Data's `map_batches(ParseBatch, fn_constructor_kwargs={...})` builds one per
    worker (actor), Dask's `map_partitions(ParseBatch(...))` ships one to each task. The
    model is looked up when it is built, so an unknown model fails at once, on the
    driver, not in every task. Results are JSON text (`as_json=True`) unless asked.
    """

    def __init__(self, *, model: str, as_json: bool = True, **options: Any) -> None:
        get_parser(model)
        self.options = {"model": model, "as_json": as_json, **options}

    def __call__(self, batch: Mapping[str, Iterable[Any]]) -> dict[str, list[Any]]:
        return parse_batch(batch, **self.options)


def dumps(value: Any) -> str:
    """JSON text, non-ASCII kept as is; escaped when it would not encode as UTF-8 (lone surrogates)."""
    text = dump_json(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value)
    return text


def parse_json_line(
    line: str | bytes, number: int, *, id_field: str | None = "id", **options: Any
) -> dict[str, Any]:
    """Parse one JSON line (UTF-8 bytes or text): {"line": number, "message" | "error": ...}.

    Options are those of `parse_record`. Invalid UTF-8 or JSON gives an error record. A
    record that has an `id_field` gets it back as "id", so results join to their inputs
    by id as well as by line.
    """
    try:
        text = line.decode("utf-8") if isinstance(line, (bytes, bytearray)) else line
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        record = json.loads(text.rstrip("\r\n"))  # JSON error positions then fit the line
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError
        return {"line": number, **_error(type(error).__name__, str(error))}
    result: dict[str, Any] = {"line": number}
    if id_field is not None and isinstance(record, Mapping) and id_field in record:
        result["id"] = record[id_field]
    return {**result, **parse_record(record, **options)}


def result_line(line: str | bytes, number: int, **options: Any) -> tuple[str, bool]:
    """The result line `parse-jsonl` writes for one input line (no newline), and whether
    it is an error record. Options are those of `parse_json_line`."""
    result = parse_json_line(line, number, **options)
    try:
        text = dumps(result)
    except (TypeError, ValueError) as error:  # a message (or an id) JSON cannot hold
        result = {"line": number, **_error(type(error).__name__, str(error))}
        text = dumps(result)
    return text, "error" in result


def parse_jsonl_chunk(
    lines: Sequence[tuple[int, str | bytes]], **options: Any
) -> tuple[list[str], int]:
    """The CLI's worker: numbered lines in, (serialized result lines, error count) out.

    Options are those of `parse_json_line`."""
    out: list[str] = []
    errors = 0
    for number, line in lines:
        text, failed = result_line(line, number, **options)
        errors += failed
        out.append(text)
    return out, errors


# -- files split among machines -------------------------------------------------------------


class Block(NamedTuple):
    """Bytes [start, end) of a JSON-lines file: whole lines, the first starting at `start`."""

    path: str
    start: int
    end: int


def plan_blocks(path: str | os.PathLike[str], blocksize: int = 32 << 20) -> list[Block]:
    """Cut a file into blocks of about `blocksize` bytes that start and end at line starts.

    Each cut is moved forward to just after the next newline, so no line is split and
    every line is in exactly one block. Only a few bytes are read at each cut (the file
    must be readable where this runs, as it must where the blocks are parsed).
    """
    if blocksize < 1:
        raise ValueError(f"blocksize must be at least 1, got {blocksize}")
    name = os.fspath(path)
    size = os.path.getsize(name)
    cuts = [0]
    with open(name, "rb") as file:
        while cuts[-1] + blocksize < size:
            file.seek(cuts[-1] + blocksize - 1)
            while True:  # to just after the newline at or after the nominal cut
                piece = file.read(1 << 16)
                if not piece:
                    cut = size
                    break
                newline = piece.find(b"\n")
                if newline >= 0:
                    cut = file.tell() - len(piece) + newline + 1
                    break
            if cut >= size:
                break
            cuts.append(cut)
    cuts.append(size)
    return [Block(name, start, end) for start, end in itertools.pairwise(cuts) if end > start] or [
        Block(name, 0, 0)
    ]


def _read(block: Block) -> bytes:
    with open(block.path, "rb") as file:
        file.seek(block.start)
        return file.read(block.end - block.start)


def _split_newlines(data: bytes) -> Iterator[bytes]:
    """Lines as iterating over a binary file gives them: split after each \\n only."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def count_lines(block: Block) -> int:
    """How many lines the block holds (a last line without a newline counts)."""
    data = _read(block)
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def parse_block(block: Block, first_line: int, **options: Any) -> list[tuple[str, bool]]:
    """`result_line` for each line of the block, in order: what `parse-jsonl` writes for
    them, and which are error records.

    `first_line` is the 1-based number of the block's first line in its file (1 plus the
    `count_lines` of the blocks before it). Options are those of `parse_json_line`.
    """
    lines = _split_newlines(_read(block))
    return [result_line(line, number, **options) for number, line in enumerate(lines, first_line)]

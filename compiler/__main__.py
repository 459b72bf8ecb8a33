"""Build commands: python -m compiler {compile NAME | compile-all | check | show NAME | lint [NAME...]
| catalog [--write]}; parse commands: {parse --model NAME [FILE] | parse-jsonl --model NAME IN OUT}.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import stat
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from runtime import batch

from . import catalog, catalog_index
from .errors import TemplateError
from .lint import lint_entry, unwaived

PARSE_DESCRIPTION = """\
Parse one model output with the compiled parser of catalog entry NAME (generated/NAME.py)
and print the message as JSON. The output text is read from FILE, or stdin when FILE is
omitted or -, and used verbatim (a trailing newline is part of it). Parsers need the
prompt the model continued (the prefix): give it with --prefix or --prefix-file; without
either, the prefix is the entry's generation_prompt["default"] (--prompt KEY picks
generation_prompt[KEY] instead, e.g. thinking)."""

PARSE_JSONL_DESCRIPTION = """\
Parse every line of a JSON-lines file, in parallel, and write one result line per input
line, in order: {"line": N, "message": {...}} or {"line": N, "error": {"type", "message"}}.
A bad line (invalid JSON, a missing field, a parser error) gives an error record and never
stops the run. Records without a prefix field use the entry's generation_prompt["default"]
(or --prefix / --prefix-file / --prompt). A summary goes to stderr."""


class _UsageError(Exception):
    """A problem with the command line or its files: reported, exit status 2."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compiler", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_one = commands.add_parser(
        "compile", help="write generated/NAME.py from templates_catalog/NAME.json"
    )
    compile_one.add_argument("name")
    commands.add_parser("compile-all", help="rebuild every catalog entry")
    commands.add_parser("check", help="fail if generated/ differs from a fresh build")
    show = commands.add_parser("show", help="print the module NAME compiles to")
    show.add_argument("name")
    lint_cmd = commands.add_parser("lint", help="lint catalog entries (all if none named)")
    lint_cmd.add_argument("names", nargs="*")
    _add_catalog_command(commands)
    _add_parse_command(commands)
    _add_parse_jsonl_command(commands)
    args = parser.parse_args(argv)

    try:
        if args.command == "compile":
            files = {Path(catalog.GENERATED) / f"{args.name}.py": catalog.build_module(args.name)}
            _report(catalog.write(files))
        elif args.command == "compile-all":
            _report(catalog.write(catalog.build_all()))
        elif args.command == "check":
            problems = catalog.check()
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                return 1
            print(
                f"generated/ matches a fresh build of {len(catalog.entry_names())} catalog entries"
            )
        elif args.command == "show":
            sys.stdout.write(catalog.build_module(args.name))
        elif args.command == "lint":
            return _lint(args.names or catalog.entry_names())
        elif args.command == "catalog":
            _write_stdout(catalog_index.index())
            if args.write:
                print(f"wrote {catalog_index.write().as_posix()}", file=sys.stderr)
        elif args.command == "parse":
            return _parse(args)
        elif args.command == "parse-jsonl":
            return _parse_jsonl(args)
    except (TemplateError, batch.UnknownModel, _UsageError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _lint(names: list[str]) -> int:
    failing = 0
    for name in names:
        findings, waivers = lint_entry(name)
        blocking = unwaived(findings, waivers)
        failing += len(blocking)
        for finding in findings:
            reason = waivers.get(finding.key) if finding.severity != "info" else None
            print(f"{name}: {finding}" + (f" (waived: {reason})" if reason else ""))
    print(f"lint: {len(names)} entries, {failing} unwaived finding(s)")
    return 1 if failing else 0


def _report(written: list[Path]) -> None:
    for path in written:
        print(f"wrote {path.as_posix()}")
    if not written:
        print("up to date")


# -- catalog --------------------------------------------------------------------------


def _add_catalog_command(commands: Any) -> None:
    command = commands.add_parser(
        "catalog",
        help="print a markdown table of the catalog",
        description="Print a markdown table of the catalog: one row per entry with its models, "
        "the delimiters of each field, its format (v1 or the extensions it uses) and its "
        "number of fixture cases.",
    )
    command.add_argument(
        "--write", action="store_true", help="also write the table to templates_catalog/README.md"
    )


# -- parse ----------------------------------------------------------------------------


def _add_prefix_options(command: Any, *, what: str) -> None:
    group = command.add_mutually_exclusive_group()
    group.add_argument(
        "--prefix",
        metavar="TEXT",
        help=f"the prompt the model continued, for {what} "
        '(default: the entry\'s generation_prompt["default"])',
    )
    group.add_argument("--prefix-file", metavar="F", help="read that prompt from file F, verbatim")
    group.add_argument(
        "--prompt",
        metavar="KEY",
        help='use the entry\'s generation_prompt[KEY] (e.g. "thinking") as that prompt',
    )


def _add_parse_command(commands: Any) -> None:
    command = commands.add_parser(
        "parse",
        help="parse one output; print the message as JSON",
        description=PARSE_DESCRIPTION,
    )
    command.add_argument(
        "--model", required=True, metavar="NAME", help="catalog entry (generated/NAME.py)"
    )
    _add_prefix_options(command, what="the output")
    command.add_argument(
        "--tools",
        metavar="F",
        help="JSON file holding a list of tool schemas; casts tool-call arguments",
    )
    command.add_argument(
        "--events",
        action="store_true",
        help="print the event stream as JSON lines instead: the initial events (from the "
        'prefix), those of one feed, the final ones, then {"type": "message", "message": ...}',
    )
    command.add_argument(
        "file", nargs="?", default="-", metavar="FILE", help="the output text (default: stdin)"
    )


def _read_text(path: str) -> str:
    """A file's text, verbatim (no newline translation); - is stdin."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            data = Path(path).read_bytes()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _UsageError(f"cannot read {path}: {error}") from None


def _prefix(args: argparse.Namespace) -> str:
    if args.prefix is not None:
        return str(args.prefix)
    if args.prefix_file is not None:
        return _read_text(args.prefix_file)
    key = args.prompt or "default"
    prompts = catalog.load_entry(args.model).generation_prompt
    if key not in prompts:
        raise _UsageError(
            f"{args.model} has no generation_prompt {key!r}; it has {', '.join(sorted(prompts))}"
        )
    return prompts[key]


def _write_stdout(text: str) -> None:
    """Write UTF-8 to stdout whatever its encoding (bytes through .buffer when there is one)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _parse(args: argparse.Namespace) -> int:
    parser_cls = batch.get_parser(args.model)
    prefix = _prefix(args)
    tools = None
    if args.tools is not None:
        try:
            tools = json.loads(_read_text(args.tools))
        except json.JSONDecodeError as error:
            raise _UsageError(f"{args.tools}: not JSON: {error}") from None
    text = _read_text(args.file)
    try:
        if not args.events:
            message = parser_cls.parse(text, prefix=prefix, tools=tools)
            _write_stdout(batch.dumps(message) + "\n")
            return 0
        parser = parser_cls(prefix, tools=tools)
        _write_events(parser.initial_events)
        _write_events(parser.feed(text))
        message, final_events = parser.finalize()
        _write_events(final_events)
        _write_events([{"type": "message", "message": message}])
    except Exception as error:  # the parser's error is the answer for this output
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


def _write_events(events: Iterable[dict[str, Any]]) -> None:
    lines = "".join(batch.dumps(event) + "\n" for event in events)
    if lines:
        _write_stdout(lines)


# -- parse-jsonl ----------------------------------------------------------------------


def _default_jobs() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _add_parse_jsonl_command(commands: Any) -> None:
    command = commands.add_parser(
        "parse-jsonl",
        help="parse every line of a JSON-lines file, in parallel",
        description=PARSE_JSONL_DESCRIPTION,
    )
    command.add_argument(
        "--model", required=True, metavar="NAME", help="catalog entry (generated/NAME.py)"
    )
    command.add_argument("input", metavar="IN.jsonl", help="JSON lines to parse (- for stdin)")
    command.add_argument("output", metavar="OUT.jsonl", help="where results go (- for stdout)")
    command.add_argument(
        "--output-field", default="output", metavar="KEY", help="the text field (default: output)"
    )
    command.add_argument(
        "--prefix-field", default="prefix", metavar="KEY", help="the prompt field (default: prefix)"
    )
    command.add_argument(
        "--tools-field",
        default=None,
        metavar="KEY",
        help="a field holding each record's tool schemas (default: none)",
    )
    _add_prefix_options(command, what="records without a prefix field")
    command.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes (default: all cores; 1 parses in this process)",
    )
    command.add_argument(
        "--chunk-size",
        type=int,
        default=256,
        metavar="N",
        help="lines per task sent to a worker (default: 256)",
    )
    command.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress counter on stderr (default: when stderr is a terminal)",
    )


class _Progress:
    """A carriage-return counter on stderr: lines, errors and, for a file, the share read."""

    INTERVAL = 0.1  # seconds between redraws

    def __init__(self, enabled: bool, total_bytes: int | None) -> None:
        self.enabled = enabled
        self.total_bytes = total_bytes
        self.width = 0
        self.last = 0.0

    def update(self, lines: int, errors: int, done_bytes: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < self.INTERVAL):
            return
        self.last = now
        text = f"parse-jsonl: {lines:,} lines, {errors:,} errors"
        if self.total_bytes:
            text += f" ({min(100, 100 * done_bytes // self.total_bytes)}%)"
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def _chunks(stream: BinaryIO, size: int) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
    """Numbered raw lines, `size` at a time, with the number of bytes they hold."""
    chunk: list[tuple[int, bytes]] = []
    read = 0
    for number, line in enumerate(stream, 1):
        chunk.append((number, line))
        read += len(line)
        if len(chunk) >= size:
            yield chunk, read
            chunk, read = [], 0
    if chunk:
        yield chunk, read


def _in_order(
    work: Any, chunks: Iterator[tuple[list[tuple[int, bytes]], int]], jobs: int
) -> Iterator[tuple[tuple[list[str], int], int]]:
    """(work(chunk), bytes) for every chunk, in input order; `jobs` > 1 uses a process pool.

    At most 4 * jobs chunks are in flight, so memory stays bounded on large inputs.
    """
    if jobs == 1:
        for chunk, size in chunks:
            yield work(chunk), size
        return
    pool = multiprocessing.get_context().Pool(jobs)
    try:
        pending: deque[tuple[Any, int]] = deque()
        for chunk, size in chunks:
            pending.append((pool.apply_async(work, (chunk,)), size))
            if len(pending) >= 4 * jobs:
                result, done = pending.popleft()
                yield result.get(), done
        while pending:
            result, done = pending.popleft()
            yield result.get(), done
        pool.close()
    except BaseException:  # an error, Ctrl-C, or the consumer stopped early
        pool.terminate()
        raise
    finally:
        pool.join()


def _parse_jsonl(args: argparse.Namespace) -> int:
    jobs = _default_jobs() if args.jobs is None else args.jobs
    if jobs < 1 or args.chunk_size < 1:
        raise _UsageError("--jobs and --chunk-size must be at least 1")
    batch.get_parser(args.model)  # fail fast on an unknown model; forked workers inherit it
    options = {
        "model": args.model,
        "output_field": args.output_field,
        "prefix_field": args.prefix_field,
        "tools_field": args.tools_field,
        "default_prefix": _prefix(args),
    }
    work = functools.partial(batch.parse_jsonl_chunk, **options)
    try:
        source: BinaryIO = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    except OSError as error:
        raise _UsageError(f"cannot read {args.input}: {error}") from None
    try:
        total = None
        if args.input != "-":
            info = os.fstat(source.fileno())
            total = info.st_size if stat.S_ISREG(info.st_mode) else None
        try:
            sink: BinaryIO = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
        except OSError as error:
            raise _UsageError(f"cannot write {args.output}: {error}") from None
        show = sys.stderr.isatty() if args.progress is None else args.progress
        progress = _Progress(show, total)
        lines = errors = done = 0
        try:
            if args.output == "-":
                sys.stdout.flush()
            for (texts, chunk_errors), size in _in_order(
                work, _chunks(source, args.chunk_size), jobs
            ):
                sink.write("".join(text + "\n" for text in texts).encode("utf-8"))
                lines += len(texts)
                errors += chunk_errors
                done += size
                progress.update(lines, errors, done)
            progress.update(lines, errors, done, force=True)
        finally:
            progress.clear()
            if sink is sys.stdout.buffer:
                sink.flush()
            else:
                sink.close()
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    target = "stdout" if args.output == "-" else args.output
    print(f"parse-jsonl: {lines} lines, {errors} errors -> {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`parse`: one model output in, its message (or its events) out as JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from integrations import batch
from runtime.tools import tool_parameters

from .common import (
    UsageError,
    add_model_options,
    add_prefix_options,
    prefix,
    read_text,
    regex_timeout,
    report,
    write_stdout,
)

DESCRIPTION = """\
Parse one model output with the compiled parser of catalog entry NAME (generated/NAME.py)
and print the message as JSON. The output text is read from FILE, or stdin when FILE is
omitted or -, and used verbatim (a trailing newline is part of it). Parsers need the
prompt the model continued (the prefix): give it with --prefix or --prefix-file; without
either, the prefix is the entry's generation_prompt["default"] (--prompt KEY picks
generation_prompt[KEY] instead, e.g. thinking)."""


def add_command(commands: Any) -> None:
    command = commands.add_parser(
        "parse", help="parse one output; print the message as JSON", description=DESCRIPTION
    )
    add_model_options(command)
    add_prefix_options(command, what="the output")
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


def run(args: argparse.Namespace) -> int:
    parser_cls = batch.get_parser(args.model)
    text_prefix = prefix(args)
    seconds = regex_timeout(args)
    tools = None
    if args.tools is not None:
        try:
            tools = json.loads(read_text(args.tools))
        except json.JSONDecodeError as error:
            raise UsageError(f"{args.tools}: not JSON: {error}") from None
        try:
            tool_parameters(tools)
        except (TypeError, ValueError) as error:
            raise UsageError(f"{args.tools}: {error}") from None
    text = read_text(args.file)
    try:
        if not args.events:
            message = parser_cls.parse(text, prefix=text_prefix, tools=tools, regex_timeout=seconds)
            write_stdout(batch.dumps(message) + "\n")
            return 0
        parser = parser_cls(text_prefix, tools=tools, regex_timeout=seconds)
        _write_events(parser.initial_events)
        _write_events(parser.feed(text))
        message, final_events = parser.finalize()
        _write_events(final_events)
        _write_events([{"type": "message", "message": message}])
    except BrokenPipeError:
        raise  # the reader of stdout went away: not the parser's error (see app.main)
    except Exception as error:  # the parser's error is the answer for this output
        report(error, kind=True)
        return 1
    return 0


def _write_events(events: Iterable[dict[str, Any]]) -> None:
    lines = "".join(batch.dumps(event) + "\n" for event in events)
    if lines:
        write_stdout(lines)

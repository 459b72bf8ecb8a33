"""What every command shares: usage errors, bounded one-line messages, I/O helpers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import templates_catalog

# An error message on stderr is one line of at most this many characters: a parser error
# can carry a whole region (megabytes of a truncated tool call), which stays available in
# the library (the exception, `parse_errors`), never in the terminal.
MAX_MESSAGE = 500


class UsageError(Exception):
    """A problem with the command line or its files: reported, exit status 2."""


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` on one line (line breaks shown as \\n), cut in the middle past `limit`."""
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    if len(flat) <= limit:
        return flat
    head = limit * 2 // 3
    tail = limit - head - 40
    return f"{flat[:head]} …[{len(flat) - head - tail:,} characters]… {flat[len(flat) - tail:]}"


def report(error: BaseException | str, *, kind: bool = False) -> None:
    """Print `error: MESSAGE` on stderr, one bounded line (`error: TYPE: MESSAGE` with kind)."""
    text = str(error)
    if kind and isinstance(error, BaseException):
        text = f"{type(error).__name__}: {text}"
    print(f"error: {one_line(text)}", file=sys.stderr)


def read_text(path: str) -> str:
    """A file's text, verbatim (no newline translation); - is stdin."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from None


def write_stdout(text: str) -> None:
    """Write UTF-8 to stdout whatever its encoding (bytes through .buffer when there is one)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def add_prefix_options(command: Any, *, what: str) -> None:
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


def prefix(args: Any) -> str:
    """The prefix the options give: --prefix, --prefix-file, or a generation prompt of the entry."""
    if args.prefix is not None:
        return str(args.prefix)
    if args.prefix_file is not None:
        return read_text(args.prefix_file)
    key = args.prompt or "default"
    try:
        prompts = templates_catalog.load(args.model).get("generation_prompt")
    except (KeyError, ValueError) as error:
        raise UsageError(error.args[0] if error.args else str(error)) from None
    if not isinstance(prompts, dict) or not isinstance(prompts.get(key), str):
        known = ", ".join(sorted(prompts)) if isinstance(prompts, dict) else "none"
        raise UsageError(f"{args.model} has no generation_prompt {key!r}; it has {known}")
    return str(prompts[key])


def add_model_options(command: Any) -> None:
    """--model (a catalog entry or a Hugging Face model id) and --regex-timeout."""
    command.add_argument(
        "--model",
        required=True,
        metavar="NAME",
        help="catalog entry (generated/NAME.py), or a Hugging Face model id such as "
        "Qwen/Qwen3-8B, resolved to its entry (templates_catalog.for_model)",
    )
    command.add_argument(
        "--regex-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds of CPU time one template-regex search may take, plus 1 s per million "
        "characters searched (default: 1); the guard against templates whose patterns backtrack",
    )


def entry_name(model: str) -> str:
    """The catalog entry for --model: an entry name as given, or a model id's entry."""
    if "/" not in model:
        return model
    try:
        return templates_catalog.for_model(model)
    except LookupError as error:
        raise UsageError(str(error)) from None


def regex_timeout(args: Any) -> float | None:
    """--regex-timeout, checked: a positive, finite number of seconds, or None."""
    seconds = args.regex_timeout
    if seconds is not None and not 0 < seconds < float("inf"):
        raise UsageError(f"--regex-timeout must be a positive number of seconds, got {seconds}")
    return seconds

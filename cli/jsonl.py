"""`parse-jsonl`: a JSON-lines corpus in, one result line per input line out, on all cores.

The output file is written next to its final name and renamed into place at the end, so
a failed or interrupted run leaves the previous file (if any) untouched, and the output
can never be the input: the run refuses that before reading anything.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import stat
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from typing import IO, Any, BinaryIO

from integrations import batch

from .common import UsageError, add_model_options, add_prefix_options, prefix, regex_timeout

DESCRIPTION = """\
Parse every line of a JSON-lines file, in parallel, and write one result line per input
line, in order: {"line": N, "message": {...}} or {"line": N, "error": {"type", "message"}}
("id" follows "line" when the record has one). A bad line (invalid JSON, a missing field,
a parser error) gives an error record and never stops the run. Records without a prefix
field use the entry's generation_prompt["default"] (or --prefix / --prefix-file /
--prompt). OUT is written to a temporary file and renamed into place when complete; it
cannot be IN. Progress goes to stderr: a bar on a terminal, else a line every
--progress-interval seconds; a summary line at the end."""


def _default_jobs() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def add_command(commands: Any) -> None:
    command = commands.add_parser(
        "parse-jsonl",
        help="parse every line of a JSON-lines file, in parallel",
        description=DESCRIPTION,
    )
    add_model_options(command)
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
    command.add_argument(
        "--id-field",
        default="id",
        metavar="KEY",
        help='a field copied to each result as "id" when a record has it (default: id)',
    )
    add_prefix_options(command, what="records without a prefix field")
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
        default=True,
        help="report progress on stderr: a bar when stderr is a terminal, else plain lines "
        "(default: on)",
    )
    command.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between plain progress lines when stderr is not a terminal (default: 10)",
    )


class _Progress:
    """Progress on stderr: a tqdm bar on a terminal, plain periodic lines otherwise.

    The bar counts bytes of a regular input file (so it has a total and an ETA), lines of
    a pipe. Without tqdm installed (it comes with the `cli` extra) a terminal gets lines.
    """

    def __init__(self, enabled: bool, total_bytes: int | None, interval: float) -> None:
        self.enabled = enabled
        self.total_bytes = total_bytes
        self.interval = interval
        self.started = self.last = time.monotonic()
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(
                    total=total_bytes,
                    unit="B" if total_bytes else " lines",
                    unit_scale=True,
                    unit_divisor=1024 if total_bytes else 1000,
                    desc="parse-jsonl",
                    file=sys.stderr,
                    dynamic_ncols=True,
                )

    def update(self, lines: int, errors: int, done_bytes: int) -> None:
        """Totals so far: lines written, error records among them, input bytes read."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"{lines:,} lines, {errors:,} errors", refresh=False)
            self.bar.update((done_bytes if self.total_bytes else lines) - self.bar.n)
            return
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        text = f"parse-jsonl: {lines:,} lines, {errors:,} errors"
        if self.total_bytes:
            text += f" ({100 * min(done_bytes, self.total_bytes) // self.total_bytes}%)"
        text += f", {lines / max(now - self.started, 1e-9):,.0f} lines/s"
        print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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


def _same_file(source: BinaryIO, output: str) -> bool:
    """Whether `output` names the file `source` reads (same inode: links and aliases too)."""
    try:
        info = os.stat(output)
    except OSError:
        return False
    mine = os.fstat(source.fileno())
    return stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == (mine.st_dev, mine.st_ino)


class _AtomicOutput:
    """A regular output file is written as a temporary file beside it, renamed on success.

    Anything else (stdout, a pipe, /dev/null) is written directly: renaming onto it would
    replace the device or pipe instead of writing to it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.temporary: str | None = None
        if name == "-":
            sys.stdout.flush()
            self.stream: IO[bytes] = sys.stdout.buffer
            return
        try:
            info = os.stat(name)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise UsageError(f"cannot write {name}: {error}") from None
        try:
            if info is not None and not stat.S_ISREG(info.st_mode):
                self.stream = open(name, "wb")
                return
            directory, base = os.path.split(os.path.abspath(name))
            fd, self.temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
        except OSError as error:
            raise UsageError(f"cannot write {name}: {error}") from None
        mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
        os.chmod(self.temporary, mode)
        self.stream = os.fdopen(fd, "wb")

    def commit(self) -> None:
        if self.stream is sys.stdout.buffer:
            self.stream.flush()
            return
        self.stream.close()
        if self.temporary is not None:
            os.replace(self.temporary, self.name)
            self.temporary = None

    def discard(self) -> None:
        if self.stream is not sys.stdout.buffer:
            self.stream.close()
        if self.temporary is not None:
            os.unlink(self.temporary)
            self.temporary = None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run(args: argparse.Namespace) -> int:
    jobs = _default_jobs() if args.jobs is None else args.jobs
    if jobs < 1 or args.chunk_size < 1:
        raise UsageError("--jobs and --chunk-size must be at least 1")
    batch.get_parser(args.model)  # fail fast on an unknown model; forked workers inherit it
    options = {
        "model": args.model,
        "output_field": args.output_field,
        "prefix_field": args.prefix_field,
        "tools_field": args.tools_field,
        "id_field": args.id_field or None,
        "default_prefix": prefix(args),
        "regex_timeout": regex_timeout(args),
    }
    work = functools.partial(batch.parse_jsonl_chunk, **options)
    try:
        source: BinaryIO = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    except OSError as error:
        raise UsageError(f"cannot read {args.input}: {error}") from None
    try:
        if args.output != "-" and _same_file(source, args.output):
            raise UsageError(
                f"{args.output} is the input file: writing it would destroy the input; "
                "write the results elsewhere"
            )
        total = None
        if args.input != "-":
            info = os.fstat(source.fileno())
            total = info.st_size if stat.S_ISREG(info.st_mode) else None
        sink = _AtomicOutput(args.output)
        progress = _Progress(args.progress, total, args.progress_interval)
        lines = errors = done = 0
        try:
            for (texts, chunk_errors), size in _in_order(
                work, _chunks(source, args.chunk_size), jobs
            ):
                sink.stream.write("".join(text + "\n" for text in texts).encode("utf-8"))
                lines += len(texts)
                errors += chunk_errors
                done += size
                progress.update(lines, errors, done)
        except BaseException:
            progress.close()
            sink.discard()
            raise
        progress.close()
        sink.commit()
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    target = "stdout" if args.output == "-" else args.output
    print(f"parse-jsonl: {lines} lines, {errors} errors -> {target}", file=sys.stderr)
    return 0

"""Errors a compiled parser raises, with where in the stream they happened.

Every failure to parse model output is a `ParseError`, the one class to catch. Each also
subclasses the class the reference raises in the same situation (ValueError,
TimeoutError), so code written against transformers keeps catching them. Messages are
one line of bounded length: a region of many megabytes shows as an excerpt, and its
whole text stays available (on the error's `__cause__` chain, or in `parse_errors` in
the lenient modes).

The regex time bound
--------------------
Template regexes come from untrusted data, so each search with one runs under a bound:
`REGEX_TIMEOUT` seconds of this thread's CPU time, plus `REGEX_TIMEOUT_PER_MB` for each
million characters searched, so that linear work on valid output of any size passes.
CPU time, not wall-clock time: a search is not failed because the machine is busy
(`regex` only offers a wall-clock limit, so a search that hits it is run again, measured,
with a doubling limit until one attempt either finishes or has itself used the bound).
A parser built with `regex_timeout=` uses its own bound (`bounded_by`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

# Seconds of CPU time one search with a template-supplied regex may take, process-wide
# (assign runtime.errors.REGEX_TIMEOUT to change it; per parser: regex_timeout=).
REGEX_TIMEOUT = 1.0
# Extra seconds allowed per million characters of searched text.
REGEX_TIMEOUT_PER_MB = 1.0

# A message shows at most this many characters of the text it is about.
EXCERPT = 80

_T = TypeVar("_T")
_BOUND: ContextVar[float | None] = ContextVar("regex_timeout", default=None)


class ParseError(Exception):
    """Model output that the template cannot turn into a message (the class to catch)."""


class FieldParseError(ParseError, ValueError):
    """A region's body did not parse as its field's content (or transform) requires.

    `field` names the field, `key` the template key path whose code failed (None if
    unknown), `offset` is where its region opened in the generated text (negative: in the
    prefix), `__cause__` is the parser's original error.
    """

    def __init__(
        self, field: str, offset: int, error: BaseException, key: str | None = None
    ) -> None:
        self.field = field
        self.offset = offset
        # The template key whose code failed (runtime.source_map), e.g. fields.x.content.
        self.key = key
        where = f"{key}, " if key else ""
        super().__init__(
            f"field {field!r} ({where}region opened at offset {offset}): {one_line(error)}"
        )


class MissingFieldError(ParseError, ValueError):
    """Fields marked optional: false never appeared in the output."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        super().__init__(f"Required response_template fields missing from parsed output: {fields}")


class RegexTimeout(ParseError, TimeoutError):
    """A template regex ran past its time bound on one search: it, not the input, is at
    fault (see `python -m compiler lint` for the shapes that backtrack). `where` names
    the template key of the pattern, `seconds` the bound that was exceeded."""

    def __init__(self, where: str, seconds: float, offset: int | None = None) -> None:
        self.where = where
        self.seconds = seconds
        self.offset = offset
        at = "" if offset is None else f" at offset {offset}"
        super().__init__(
            f"{where}: regex search{at} used more than {seconds:g} s of CPU time; the pattern "
            "backtracks (python -m compiler lint names such shapes), or raise the bound "
            "with regex_timeout= (CLI: --regex-timeout)"
        )


def excerpt(text: str, at: int = 0, width: int = EXCERPT) -> str:
    """`text` around index `at`, quoted, at most `width` characters, cuts marked '...'."""
    if len(text) <= width:
        return repr(text)
    start = max(0, min(at - width // 2, len(text) - width))
    shown = repr(text[start : start + width])
    head = "..." if start > 0 else ""
    tail = "..." if start + width < len(text) else ""
    return f"{head}{shown}{tail} ({len(text)} characters)"


def one_line(error: BaseException, width: int = 4 * EXCERPT) -> str:
    """The error's message on one line of at most `width` characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= width else text[: width - 3] + "..."


@contextmanager
def bounded_by(seconds: float | None) -> Iterator[None]:
    """Within the block, template regexes run under `seconds` (None: REGEX_TIMEOUT)."""
    token = _BOUND.set(seconds)
    try:
        yield
    finally:
        _BOUND.reset(token)


def regex_timeout(size: int = 0) -> float:
    """The CPU-time bound for one search over `size` characters."""
    bound = _BOUND.get()
    if bound is None:
        bound = REGEX_TIMEOUT
    return bound + size * REGEX_TIMEOUT_PER_MB / 1_000_000


def search_bounded(
    call: Callable[[float], _T], where: str, size: int, offset: int | None = None
) -> _T:
    """`call(timeout)` (a regex method given `timeout=`) under the CPU-time bound.

    The regex module's limit is wall-clock time; an attempt that hits it but used less
    CPU time than the bound was slowed down by other work, and is retried with a doubled
    limit. Only an attempt that used the bound itself raises RegexTimeout. The first
    attempt is not measured (a CPU-clock read costs ~1 us, a search of a tool call's body
    often less): one that hits the limit is run again, measured, with the same limit, so a
    search that really runs long fails after twice the bound.
    """
    bound = regex_timeout(size)
    try:
        return call(bound)  # not measured: reading the CPU clock costs more than most searches
    except TimeoutError:
        pass
    wall = bound
    while True:
        started = time.thread_time()
        try:
            return call(wall)
        except TimeoutError:
            if time.thread_time() - started >= bound:
                raise RegexTimeout(where, bound, offset) from None
            wall *= 2

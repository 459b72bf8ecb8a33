"""Errors a compiled parser raises, with where in the stream they happened.

They subclass the classes the reference raises in the same situations (ValueError,
TimeoutError), so code written against transformers keeps catching them.
"""

from __future__ import annotations

# Seconds one search with a template-supplied regex may take before RegexTimeout is
# raised. Process-wide: assign runtime.errors.REGEX_TIMEOUT to change it.
REGEX_TIMEOUT = 1.0


class FieldParseError(ValueError):
    """A region's body did not parse as its field's content (or transform) requires.

    `field` names the field, `offset` is where its region opened in the generated text
    (negative: in the prefix), `__cause__` is the parser's original error.
    """

    def __init__(self, field: str, offset: int, error: BaseException) -> None:
        self.field = field
        self.offset = offset
        super().__init__(f"field {field!r} (region opened at offset {offset}): {error}")


class MissingFieldError(ValueError):
    """Fields marked optional: false never appeared in the output."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        super().__init__(f"Required response_template fields missing from parsed output: {fields}")


class RegexTimeout(TimeoutError):
    """A template regex ran past its time bound on one search: it, not the input, is at
    fault (see `python -m compiler lint` for the shapes that backtrack)."""

    def __init__(self, where: str, seconds: float, offset: int | None = None) -> None:
        self.where = where
        self.seconds = seconds
        self.offset = offset
        at = "" if offset is None else f" at offset {offset}"
        super().__init__(f"{where}: regex search{at} ran past {seconds:g} s")

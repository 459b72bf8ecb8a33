"""Errors for templates that cannot be compiled, naming where the problem is."""

from __future__ import annotations


class TemplateError(ValueError):
    """A response template the reference would reject, with the key path at fault.

    str(error) reads `SOURCE: PATH: DETAIL`, e.g.
    `templates_catalog/qwen3.json: fields.tool_calls.open_pattern: invalid regex: ...`.
    """

    def __init__(self, path: str, detail: str, *, source: str | None = None) -> None:
        self.path = path
        self.detail = detail
        self.source = source
        super().__init__(": ".join(part for part in (source, path, detail) if part))

    def at(self, source: str) -> TemplateError:
        """The same error, naming the file or object the template came from."""
        return type(self)(self.path, self.detail, source=source)


class TemplateTypeError(TemplateError, TypeError):
    """Raised where the reference fails with a TypeError (e.g. a non-string pattern)."""

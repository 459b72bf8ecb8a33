"""Which template key a line of generated code comes from: the source map.

Generated modules put a comment naming a template key path above the code of each part
of a field (`# fields.tool_calls.content: xml-inline`, `# fields.tool_calls.transform`).
When that code raises, the failing line of the generated module, read upward to the
nearest such comment, names the key the failure comes from. Nothing is kept per module:
the lines are the ones `linecache` serves for tracebacks (the module's file, or the
source the JIT compiler registered), read only when an error is being reported.
"""

from __future__ import annotations

import linecache
import re
from typing import Any

# A comment that names a key path: "# fields.x.content", "# fields["a b"].transform", ended
# by ":", a space or the line's end.
_KEY_COMMENT = re.compile(r'#\s+(fields(?:\["(?:[^"\\]|\\.)*"\]|\.[^\s:\[]+)+)')


def key_of(error: BaseException, module_globals: dict[str, Any]) -> str | None:
    """The key path named above the line of generated code that raised `error`: the
    innermost traceback frame that runs code of the module with these globals. None when
    no such frame or comment is found (e.g. the source is not available)."""
    found: tuple[str, int] | None = None
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if frame.f_globals is module_globals:
            found = (frame.f_code.co_filename, trace.tb_lineno)
        trace = trace.tb_next
    if found is None:
        return None
    filename, line = found
    lines = linecache.getlines(filename, module_globals)
    for text in reversed(lines[:line]):
        match = _KEY_COMMENT.match(text.strip())
        if match:
            return match.group(1)
    return None

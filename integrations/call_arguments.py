"""Tool-call arguments streamed as fragments while the call's region is still growing.

A parser only parses a tool call when its region closes. A Chat Completions stream sends
the call earlier: a first delta with the call's name, then fragments of
`function.arguments` that the client concatenates. The fragments must add up to exactly
the string the final message holds, `json.dumps(arguments, ensure_ascii=False)`, for every
chunking of the output. So a fragment is sent only when it is certain to be a prefix of
that string: from the region's raw text so far, `CallArguments.advance` hands out what the
text adds to the longest such prefix, and the adapter sends it.

Which templates stream fragments is decided from the template alone (`plan_for`):
- JSON calls: a `json` content parser without dialect options, no `transform_each`, and
  a transform whose `function` is `{content}` (name and arguments are keys of the
  body) or `{"name": ..., "arguments": ...}` with the name a capture (`{name}`) or a key
  of the body (`{content.name}`) and the arguments the body (`{content}`) or one of its
  keys (`{content.args}`). Members of the arguments object are sent as they complete
  (`"key": ` as soon as the key is read), a string value character by character when no
  tool schema can cast it, other values once complete. The closing `}` waits for the
  call's successful close, so the arguments of a call that fails after all (truncated,
  malformed) are never valid JSON, and no client runs them by mistake.
- XML-parameter calls: `xml-inline` / `x-xml-inline` (no `merge_duplicates`) whose
  arguments are the parsed tags and whose name is a capture. A parameter is sent once its
  tag is complete: its value is computed by the template's own close code on the text up
  to that tag, so value parsers and tool-schema casts are the final ones.
Every other template (transform_each lists, pythonic calls, JSON dialects, JSON-in-string
arguments) sends each call whole at its close. A call's name is sent (the call's first
delta) as soon as it is known: at the region's open for a captured name, once the body's
name key is read otherwise. The work per call is linear in its length: JSON is read on from
where the last chunk stopped, and XML tags are checked again as the unsettled text grows
by an eighth.

Known limit: a repeated key (`{"a": 1, "a": 2}`, or a repeated XML parameter) keeps its
first position and its last value in the parsed dict, which an earlier fragment may
already contradict; the adapter then reports a `StreamDivergence` on its error channel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from runtime.tools import coerce_tool_calls, schema_types

# `json.dumps(value, ensure_ascii=False)`, with the encoder made once: json.dumps makes one
# per call when given an option (a call's two arguments: 5.9 -> 1.5 us).
dump_json: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False).encode

_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_WHITESPACE = " \t\n\r"
# What may follow a complete number in an object: a number followed by anything else is
# either unfinished ("-0." of "-0.5") or not JSON.
_NUMBER_ENDS = frozenset(_WHITESPACE + ",}")
_DECODER = json.JSONDecoder()
# The decoder's string scanner: (value, end) of the JSON string whose body starts at an index.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
# For a JSON value starting with each of these, the character that must come later for it to end.
_CLOSERS = {'"': '"', "{": "}", "[": "]"}
# Schema types under which a string argument may be cast to something else.
_CAST_TYPES = frozenset({"integer", "number", "boolean", "null", "object", "array"})
# Texts appended to a region's body to see whether an XML tag match could still change.
_PROBES = ("\uffff", "<", "\n", " ")
# A run of a JSON string's text up to its closing quote, an incomplete escape or an error;
# and a \u escape of a high surrogate at the end of such a run.
_STRING_RUN = re.compile(r'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*')
_HIGH_SURROGATE = re.compile(r"(?:^|[^\\])(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})$")


@dataclass(frozen=True)
class Plan:
    """How one template's tool calls are streamed: `kind` "json" or "xml"."""

    kind: str
    name_capture: str | None = None  # the name is this capture of the open delimiter
    name_key: str | None = None  # or this key of the JSON body
    path: tuple[str, ...] = ()  # where the arguments object sits in the JSON body
    tag_pattern: Any = None  # xml: the compiled tag pattern


def _placeholder(value: Any) -> str | None:
    match = _PLACEHOLDER.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def plan_for(template: dict[str, Any]) -> Plan | None:
    """The streaming plan for a template's tool calls; None sends each call at its close."""
    field = (template.get("fields") or {}).get("tool_calls")
    if not isinstance(field, dict) or field.get("transform_each") or field.get("x-extend"):
        return None
    transform = field.get("transform")
    if not isinstance(transform, dict) or set(transform) != {"type", "function"}:
        return None
    if transform["type"] != "function":
        return None
    function = transform["function"]
    content = field.get("content", "text")
    args = field.get("content_args")
    if content == "json" and not args:
        if _placeholder(function) == "content":
            return Plan("json", name_key="name", path=("arguments",))
        if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
            return None
        name, arguments = _placeholder(function["name"]), _placeholder(function["arguments"])
        if name is None or arguments is None:
            return None
        arguments_path = arguments.split(".")
        if arguments_path[0] != "content" or len(arguments_path) > 2:
            return None
        name_path = name.split(".")
        if name_path[0] == "content":
            if len(name_path) != 2:
                return None
            return Plan("json", name_key=name_path[1], path=tuple(arguments_path[1:]))
        if len(name_path) != 1:
            return None
        return Plan("json", name_capture=name, path=tuple(arguments_path[1:]))
    if content in ("xml-inline", "x-xml-inline") and isinstance(args, dict):
        if args.get("merge_duplicates") or not isinstance(args.get("tag_pattern"), str):
            return None
        if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
            return None
        name = _placeholder(function["name"])
        if _placeholder(function["arguments"]) != "content" or name is None or "." in name:
            return None
        try:
            pattern = regex.compile(args["tag_pattern"], regex.DOTALL)
        except regex.error:
            return None
        return Plan("xml", name_capture=name, tag_pattern=pattern)
    return None


class _Trial:
    """The part of a parser a generated `_close_tool_calls` uses, over a given body: the
    template's own close code computes what a complete prefix of the body parses to."""

    def __init__(self, body: str, captures: dict[str, Any], params: dict[str, Any]) -> None:
        self._text = body
        self._captures = captures
        self._params = params
        self._output: dict[str, Any] = {}

    def _body(self) -> str:
        return self._text

    def _coerce(self, value: Any) -> Any:
        return coerce_tool_calls(value, self._params) if self._params else value


class CallArguments:
    """The certain part of one call's name and serialised arguments, from its raw text.

    `captures` are the open delimiter's named groups, `close` the parser state's close
    function (used by the XML plan), `params` the tools' parameter schemas by tool name.
    """

    def __init__(
        self,
        plan: Plan,
        captures: dict[str, Any],
        close: Callable[..., Any] | None,
        params: dict[str, dict[str, Any]],
    ) -> None:
        self.plan = plan
        self.captures = dict(captures)
        self.close = close
        self.params = params
        self.diverged = False  # a repeated key was seen: nothing more is certain
        # The call's text: `_window` holds it from offset `_base` on (JSON drops what it has
        # read; positions below are offsets in `_window`), `_new` what came since.
        self._window = ""
        self._base = 0
        self._new: list[str] = []
        self._length = 0
        # JSON: the arguments object's start, the members read and their serialised text,
        # the member being read (key, serialised start, where its value may start), where
        # reading resumes.
        self._object: int | None = None
        self._members: dict[str, Any] = {}
        self._out: list[str] = []  # certain text not yet handed out by advance()
        self._current: tuple[str, str, int] | None = None
        self._pos = 0
        self._separator = False  # a member was read: "," or "}" comes next
        self._closed = False  # the object ended, or stopped being JSON
        self._in_string = False  # the member's value is a string being read:
        self._streamed = False  # whether it is sent as it comes (no schema may cast it),
        self._scanned = 0  # how far it is decoded,
        self._decoded: list[str] = []  # and its text so far
        self._name: str | None = None
        # XML: the end of the settled tags, the text's length at the last check, the keys
        # and serialised text of the settled tags.
        self._settled = 0
        self._checked = -1
        self._keys: set[Any] = set()
        self._xml_text = ""
        self._xml_sent = 0

    def add(self, text: str) -> None:
        """More of the region's text."""
        if text:
            self._new.append(text)
            self._length += len(text)

    def _body(self) -> str:
        if self._new:
            self._window += "".join(self._new)
            self._new = []
        return self._window

    def name(self) -> str | None:
        """The call's name, once it is certain."""
        plan = self.plan
        if plan.name_capture is not None:
            name = self.captures.get(plan.name_capture)
            return name if isinstance(name, str) else None
        body = self._body()  # nothing is dropped before the name is known
        start = _skip(body, 0)
        if self._name is None and start < len(body) and body[start] == "{":
            members, _ = _object_members(body, start)
            for key, value in members:
                if key == plan.name_key and isinstance(value, str):
                    self._name = value
        return self._name

    def advance(self, name: str) -> str:
        """What the text so far adds to the certain prefix of the final arguments string.

        The pieces handed out, concatenated, are always a prefix of that string.
        """
        if self.diverged:
            return ""
        if self.plan.kind == "xml":
            # Settling is checked again once the unsettled text has grown by an eighth (or
            # a character, if shorter), so a long parameter value costs linear time overall.
            # Until then nothing new is certain: most chunks stop here.
            if self._length - self._checked < max(1, (self._length - self._settled) // 8):
                return ""
            text = self._xml()
            piece = text[self._xml_sent :]
            self._xml_sent = len(text)
            return piece
        self._json(self._body(), name)
        self._drop()
        piece = "".join(self._out)
        self._out = []
        return piece

    def _drop(self) -> None:
        """Drop the text JSON reading will not look at again, so each chunk costs time in
        proportion to its own length, not the call's."""
        if self._object is None or (self.plan.name_capture is None and self._name is None):
            return
        if self._current is None:
            keep = self._pos
        elif self._in_string:
            keep = self._scanned
        else:
            keep = self._current[2]
        if keep <= 0:
            return
        self._window = self._window[keep:]
        self._base += keep
        self._pos -= keep
        self._scanned -= keep
        self._object = -1  # found, and dropped
        if self._current is not None:
            key, lead, start = self._current
            self._current = (key, lead, start - keep)

    # -- JSON ------------------------------------------------------------------------------

    def _json(self, body: str, name: str) -> None:
        """Read the arguments object's members on from where the last call stopped, and
        put what becomes certain in `_out`: "{", each member's `"key": ` as soon as it is
        read, then its value (a string as it comes, unless a schema may cast it)."""
        if self._object is None:
            self._object = self._find_object(body)
            if self._object is None:
                return
            self._pos = self._object + 1
            self._out.append("{")
        while not self._closed:
            if self._current is not None:  # a member whose key is read: on with its value
                if self._member(body, -1, name) is None:
                    break
                continue
            pos = _skip(body, self._pos)
            if pos >= len(body):
                break
            if self._separator:
                if body[pos] == ",":
                    self._separator = False
                    self._pos = pos + 1
                    continue
                self._closed = True  # "}" ends the object; anything else fails the parse
                break
            if body[pos] == "}" and not self._members:
                self._closed = True
                break
            member = self._member(body, pos, name)
            if member is None:
                break

    def _find_object(self, body: str) -> int | None:
        """Where the arguments object opens, once that is certain."""
        start = _skip(body, 0)
        for key in self.plan.path:
            if start >= len(body) or body[start] != "{":
                return None
            members, tail = _object_members(body, start)
            if not any(member == key for member, _ in members) and (tail is None or tail[0] != key):
                return None  # the key is not read yet
            located = _locate_member(body, start, key)
            if located is None:
                return None
            start = located
        if start >= len(body) or body[start] != "{":
            return None
        return start

    def _member(self, body: str, pos: int, name: str) -> bool | None:
        """Read the member at `pos` (or go on with the current one): True once complete."""
        if self._current is None:
            if body[pos] != '"':
                self._closed = True  # not JSON: the parse fails, nothing more is certain
                return None
            if _cut(body, pos):
                return None
            try:
                key, end = _scanstring(body, pos + 1)
            except ValueError:
                return None
            end = _skip(body, end)
            if end >= len(body) or body[end] != ":":
                if end < len(body):
                    self._closed = True
                return None
            if key in self._members:
                self.diverged = True  # json.loads keeps the last value, at the first position
                self._closed = True
                return None
            lead = (", " if self._members else "") + f"{dump_json(key)}: "
            self._current = (key, lead, end + 1)
            self._out.append(lead)
        key, lead, after_colon = self._current
        start = after_colon if self._in_string else _skip(body, after_colon)
        if start >= len(body):
            return None
        if not self._in_string and body[start] == '"':
            self._in_string, self._scanned, self._decoded = True, start + 1, []
            self._streamed = self._uncast(name, key)
            if self._streamed:
                self._out.append('"')
        if self._in_string:
            value, after = self._string(body)
            if value is None:
                return None
        else:
            if _cut(body, start):
                return None
            try:
                value, after = _DECODER.raw_decode(body, start)
            except ValueError:
                return None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if after >= len(body) or body[after] not in _NUMBER_ENDS:
                    return None  # more of it may follow: "1" of "12", "-0" of "-0.5", "1e"
        if not (self._in_string and self._streamed):  # a streamed string is sent already
            value = self._cast(name, {key: value})[key]
            self._out.append(dump_json(value))
        self._members[key] = value
        self._current = None
        self._in_string = False
        self._pos = after
        self._separator = True
        return True

    def _string(self, body: str) -> tuple[Any, int]:
        """The string value being read: (its value, where it ends) once closed, else
        (None, -1). Only the text new since the last call is decoded; when streamed, each
        decoded piece goes out escaped as json.dumps escapes it."""
        match = _STRING_RUN.match(body, self._scanned)
        assert match is not None  # the pattern matches the empty string
        stop = match.end()
        closed = stop < len(body) and body[stop] == '"'
        piece = body[self._scanned : stop]
        if not closed:
            held = _HIGH_SURROGATE.search(piece)  # its low half may follow: keep it for later
            if held is not None:
                piece = piece[: held.start(1)]
            elif piece and "\ud800" <= piece[-1] <= "\udbff":
                piece = piece[:-1]
        if piece:
            decoded = json.loads('"' + piece + '"')
            self._decoded.append(decoded)
            if self._streamed:
                self._out.append(dump_json(decoded)[1:-1])
            self._scanned += len(piece)
        if not closed:
            return None, -1
        if self._streamed:
            self._out.append('"')
        return "".join(self._decoded), stop + 1

    def _cast(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self.params:
            return arguments
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        cast = coerce_tool_calls(call, self.params)["function"]["arguments"]
        return cast if isinstance(cast, dict) else arguments

    def _uncast(self, name: str, key: str) -> bool:
        """Whether a string value of `key` reaches the message as it is (no schema cast)."""
        properties = self.params.get(name)
        if not properties or key not in properties:
            return True
        return not _CAST_TYPES.intersection(schema_types(properties[key]))

    # -- XML -------------------------------------------------------------------------------

    def _xml(self) -> str:
        """The parameters whose tags are settled, as the template's close code parses them
        (checked again now: `advance` says when)."""
        self._checked = self._length
        body = self._body()
        pattern = self.plan.tag_pattern
        end, keys = _certain_end(pattern, body, self._settled)
        if end <= self._settled or self.close is None:
            return self._xml_text
        self._settled = end
        if len(set(keys)) != len(keys) or self._keys.intersection(keys):
            self.diverged = True
            return ""
        self._keys.update(keys)
        trial = _Trial(body[:end], self.captures, self.params)
        events: list[dict[str, Any]] = []
        try:
            self.close(trial, events)
        except Exception:  # the close will fail on the full body too: nothing is certain
            return self._xml_text
        value = events[-1].get("value") if events else None
        function = value.get("function") if isinstance(value, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, dict) and arguments:
            self._xml_text = "{" + ", ".join(
                f"{dump_json(k)}: {dump_json(v)}" for k, v in arguments.items()
            )
        return self._xml_text


def _cut(text: str, start: int) -> bool:
    """Whether the JSON value (or key) at `start` surely does not end in `text`: a string,
    object or array whose closing character is nowhere after it. Decoding it would raise,
    and a raised JSONDecodeError costs more than the read (it works out a line and column):
    most calls arrive cut inside a string."""
    closer = _CLOSERS.get(text[start]) if start < len(text) else None
    return closer is not None and text.find(closer, start + 1) == -1


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _object_members(text: str, start: int) -> tuple[list[tuple[str, Any]], tuple[str, int] | None]:
    """The complete members of the JSON object at `text[start]` ("{"), in order, and the
    member being read: (key, where its value starts) once its key and colon are read.

    A member is complete once its value is, and, for a number, once text follows it (more
    digits could still come). Stops at the first text that is not JSON.
    """
    members: list[tuple[str, Any]] = []
    pos = _skip(text, start + 1)
    if pos < len(text) and text[pos] == "}":
        return members, None
    while pos < len(text):
        if text[pos] != '"' or _cut(text, pos):
            return members, None
        try:
            key, pos = _scanstring(text, pos + 1)
        except ValueError:
            return members, None
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] != ":":
            return members, None
        value_start = _skip(text, pos + 1)
        if _cut(text, value_start):
            return members, (key, value_start)
        try:
            value, end = _DECODER.raw_decode(text, value_start)
        except ValueError:
            return members, (key, value_start)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if end >= len(text) or text[end] not in _NUMBER_ENDS:
                return members, (key, value_start)
        after = _skip(text, end)
        members.append((key, value))
        if after >= len(text) or text[after] == "}":
            return members, None
        if text[after] != ",":
            return members, None
        pos = _skip(text, after + 1)
    return members, None


def _locate_member(text: str, start: int, key: str) -> int | None:
    """Where the value of the first member `key` of the object at `start` begins."""
    pos = _skip(text, start + 1)
    while pos < len(text) and text[pos] == '"':
        if _cut(text, pos):
            return None
        try:
            member, pos = _scanstring(text, pos + 1)
        except ValueError:
            return None
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] != ":":
            return None
        value_start = _skip(text, pos + 1)
        if member == key:
            return value_start
        if _cut(text, value_start):
            return None
        try:
            _, end = _DECODER.raw_decode(text, value_start)
        except ValueError:
            return None
        pos = _skip(text, end)
        if pos >= len(text) or text[pos] != ",":
            return None
        pos = _skip(text, pos + 1)
    return None


def _certain_end(pattern: Any, body: str, start: int) -> tuple[int, list[Any]]:
    """Where the tag matches from `start` on that no continuation of `body` can change
    end (`start` if none), and their keys.

    A match is taken as settled when the body followed by each probe text yields it too
    (same span, same groups): a match that ran to the end of the text (`\\Z`, an
    unfinished value) then differs. Each probe's matches are compared only as far as the
    matches still settled, and the probes stop once none is.
    """
    # Most checks find the first match still running on into the text after the body (a
    # value not yet closed): then nothing settles, and one search of one probe tells it,
    # as the whole comparison below would (its first probe).
    first = pattern.search(body + _PROBES[0], start)
    if first is None or first.end() > len(body):
        return start, []
    settled = [(match.span(), match.groupdict()) for match in pattern.finditer(body, start)]
    if not settled or settled[0] != (first.span(), first.groupdict()):
        return start, []
    for probe in _PROBES:
        if not settled:
            break
        if probe is _PROBES[0] and len(settled) == 1:
            # That search is the first probe's first match: a match of the body settles
            # one tag at a time mostly, so this saves one of the six searches of a
            # settling check (the 16 settling checks of
            # bench/peers.py's XML calls: 34-36 us to 28-30 us each).
            continue
        count = 0
        extended = pattern.finditer(body + probe, start)
        for (span, groups), theirs in zip(settled, extended, strict=False):
            if theirs.span() != span or theirs.groupdict() != groups:
                break
            count += 1
        del settled[count:]
    end, keys = start, []
    for (_, stop), groups in settled:
        if stop > len(body):
            break
        end = stop
        keys.append(groups.get("key"))
    return end, keys

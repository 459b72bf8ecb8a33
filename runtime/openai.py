"""OpenAI Chat Completions shapes for a parsed message and for a parser's event stream.

Servers that speak the Chat Completions API answer with an assistant message, or with
`chat.completion.chunk` objects whose deltas the client concatenates. `to_chat_message`
converts a parsed message; `ChunkAdapter` converts parser events into chunks; and
`CompletionStream` drives a Parser and an adapter together. The two paths agree: the deltas
of a stream merge (as an OpenAI client merges them) into exactly the message
`to_chat_message` returns for the same output, tool-call ids included when both paths are
given the same `call_id` factory.

Mapping (the rest of the message is dropped; the parsed message keeps it):
- `content` -> `content`, `thinking` -> `reasoning_content`, when the value is a non-empty
  string; an empty or non-string value (an int or json parser's result, the list of a
  `repeats` field without `join`) is left out, so `content` is None;
- `tool_calls` -> a list of `{"id", "type": "function", "function": {"name", "arguments"}}`,
  `arguments` as a JSON string (`ensure_ascii=False`; a string is passed through, a missing
  one is `{}`). Each call must have a `function` dict with a string `name`: anything else
  raises ValueError, as an unparsable call does in the parser.

Known divergence: a field without `repeats` that occurs twice keeps only its last region in
the message (the template's semantics), while the stream has already sent the earlier
ones. A template's string `defaults` for content or thinking are not streamed either.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

CallId = Callable[[int], str]
Chunk = dict[str, Any]

# The message keys of the text fields, and the Chat Completions keys they become.
TEXT_KEYS = {"content": "content", "thinking": "reasoning_content"}
TOOL_CALLS = "tool_calls"


def default_call_id(index: int) -> str:
    """`call_0`, `call_1`, ...: deterministic, but repeated from one response to the next."""
    return f"call_{index}"


def random_call_ids() -> CallId:
    """An id factory for one response: a random prefix, so ids are unique across a chat.

    Create one per response and give it to both paths; they then agree on every id.
    """
    token = secrets.token_hex(6)
    return lambda index: f"call_{token}_{index}"


def to_chat_message(
    message: dict[str, Any], *, call_id: CallId = default_call_id
) -> dict[str, Any]:
    """The Chat Completions assistant message for a parsed message (see the module docstring)."""
    chat: dict[str, Any] = {"role": "assistant", "content": _text(message.get("content"))}
    thinking = _text(message.get("thinking"))
    if thinking is not None:
        chat["reasoning_content"] = thinking
    calls = _tool_calls(message.get(TOOL_CALLS))
    if calls:
        chat["tool_calls"] = [
            _openai_call(call, index, call_id) for index, call in enumerate(calls)
        ]
    return chat


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tool_calls(value: Any) -> list[Any]:
    """The calls in a tool_calls value: one call, a list of them, or a list of such lists.

    A `repeats` field holds a list of its regions' values, and a `transform_each` region's
    value is itself a list; empty values are no calls, as the parser drops them.
    """
    if not value:
        return []
    if isinstance(value, list):
        return [call for item in value for call in _tool_calls(item)]
    return [value]


def _openai_call(call: Any, index: int, call_id: CallId) -> dict[str, Any]:
    """One tool call in the API's shape; the one rule both paths use."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ValueError(
            f"not a tool call (expected {{'function': {{'name': str, 'arguments': ...}}}}): {call!r}"
        )
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": call_id(index),
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


class _TextField:
    """Streaming state of one text field (content or thinking).

    The message value is only final at region_close: stripped (unless `"strip": false`) and,
    for `repeats` + `join`, appended to the earlier regions' values after the join string.
    Text is sent as it arrives, except what stripping may still remove (whitespace at the
    region's start, and at its end until more text follows); the join string goes out just
    before the region's first text. At close, whatever of the final value was not sent yet is.
    """

    def __init__(self, spec: dict[str, Any], default: Any) -> None:
        args = spec.get("content_args")
        self.strip = not isinstance(args, dict) or bool(args.get("strip", True))
        self.join = spec.get("join") if spec.get("repeats") else None
        # A `repeats` field without `join` is a list, which no text key can hold.
        self.streamed = not spec.get("repeats") or self.join is not None
        # Other parsers and transforms change the text; their value is sent whole at close.
        self.eager = spec.get("content", "text") == "text" and "transform" not in spec
        # Whether the message already holds a value the next region is joined to.
        self.joined = default is not None
        self.open()

    def open(self) -> None:
        self.sent = ""  # this region's contribution sent so far, join string included
        self.held = ""  # trailing whitespace not sent yet
        self.begun = False

    def chunk(self, text: str) -> str:
        if not (self.streamed and self.eager):
            return ""
        if self.strip:
            if not self.begun:
                text = text.lstrip()
            text = self.held + text
            kept = text.rstrip()
            self.held = text[len(kept) :]
            text = kept
        if not text:
            return ""
        if not self.begun:
            self.begun = True
            if self.join is not None and self.joined:
                text = self.join + text
        self.sent += text
        return text

    def close(self, value: Any) -> str:
        if not self.streamed:
            return ""
        if self.join is not None:  # the parser has checked that value is a string
            final = (self.join if self.joined else "") + value
            self.joined = True
        else:
            final = value if isinstance(value, str) else ""
        # What was sent is always a prefix of `final`: the region's text, less what strip removes.
        rest = final[len(self.sent) :]
        self.open()
        return rest


class ChunkAdapter:
    """Turns one response's parser events into `chat.completion.chunk` dicts.

    Feed every event, the parser's `initial_events` and `finalize()` events included, to
    `convert`, then call `finish` once. The first chunk carries the role; text arrives as
    `content` / `reasoning_content` deltas; each tool call comes as one delta, at its
    region's close (only then is it parsed), with its index, id, type, name and arguments;
    the last chunk has an empty delta and the finish reason. Unknown event types and
    fields other than content, thinking and tool_calls are ignored.
    """

    def __init__(
        self,
        template: dict[str, Any],
        *,
        model: str = "",
        completion_id: str | None = None,
        created: int | None = None,
        call_id: CallId = default_call_id,
    ) -> None:
        self.id = completion_id or f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time()) if created is None else created
        self.model = model
        self.call_id = call_id
        fields = template.get("fields", {})
        defaults = template.get("defaults") or {}
        self._text = {
            name: _TextField(fields[name], defaults.get(name))
            for name in TEXT_KEYS
            if name in fields
        }
        self._calls = 0
        self._started = False

    def convert(self, events: Iterable[dict[str, Any]]) -> list[Chunk]:
        deltas: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            deltas.append({"role": "assistant"})
        for event in events:
            kind, name = event.get("type"), event.get("field")
            text_field = self._text.get(name) if isinstance(name, str) else None
            if text_field is not None and isinstance(name, str):
                if kind == "region_open":
                    text_field.open()
                elif kind == "region_chunk":
                    _add_text(deltas, TEXT_KEYS[name], text_field.chunk(event["text"]))
                elif kind == "region_close":
                    _add_text(deltas, TEXT_KEYS[name], text_field.close(event["value"]))
            elif name == TOOL_CALLS and kind == "region_close":
                for call in _tool_calls(event["value"]):
                    delta = {"index": self._calls, **_openai_call(call, self._calls, self.call_id)}
                    deltas.append({"tool_calls": [delta]})
                    self._calls += 1
        return [self._chunk(delta) for delta in deltas]

    def finish(self, finish_reason: str | None = None) -> list[Chunk]:
        """The closing chunk; the reason defaults to "tool_calls" if any call was sent, else "stop"."""
        chunks = self.convert(())  # the role chunk, if nothing came before
        reason = finish_reason or ("tool_calls" if self._calls else "stop")
        return [*chunks, self._chunk({}, reason)]

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }


def _add_text(deltas: list[dict[str, Any]], key: str, text: str) -> None:
    """Append a text delta, merged into the previous one when it is of the same key."""
    if not text:
        return
    if deltas and list(deltas[-1]) == [key]:
        deltas[-1][key] += text
    else:
        deltas.append({key: text})


def template_of(parser_class: type) -> dict[str, Any]:
    """The TEMPLATE of the module a Parser class was generated in.

    `compiler.load_parser` does not register its modules in `sys.modules`, so the class's
    own (always generated) methods are asked for their globals instead.
    """
    module = sys.modules.get(parser_class.__module__)
    template = getattr(module, "TEMPLATE", None)
    if template is None:
        method = vars(parser_class).get("_after_last_anchor")
        template = getattr(method, "__globals__", {}).get("TEMPLATE")
    if not isinstance(template, dict):
        raise ValueError(f"no TEMPLATE found for {parser_class!r}; pass template=")
    return template


class CompletionStream:
    """A Parser and a ChunkAdapter for one response: text in, chunks out.

    `parser` is a generated Parser class (built here with `prefix` and `tools`) or an
    instance nothing has been fed to yet. `initial` holds the chunks of the parser's
    `initial_events`, led by the role chunk; after `finish`, `message` is the parsed message
    and `chat_message()` its non-streaming conversion, with the same tool-call ids.
    """

    def __init__(
        self,
        parser: Any,
        prefix: str | None = None,
        *,
        tools: Iterable[Any] | None = None,
        template: dict[str, Any] | None = None,
        model: str = "",
        completion_id: str | None = None,
        created: int | None = None,
        call_id: CallId = default_call_id,
    ) -> None:
        if isinstance(parser, type):
            parser = parser(prefix, tools=tools)
        elif prefix is not None or tools is not None:
            raise TypeError("prefix and tools are for a Parser class, not an instance")
        self.parser = parser
        self.adapter = ChunkAdapter(
            template if template is not None else template_of(type(parser)),
            model=model,
            completion_id=completion_id,
            created=created,
            call_id=call_id,
        )
        self.message: dict[str, Any] | None = None
        self.initial = self.adapter.convert(parser.initial_events)

    def feed(self, text: str) -> list[Chunk]:
        return self.adapter.convert(self.parser.feed(text))

    def finish(self, finish_reason: str | None = None) -> list[Chunk]:
        """Finalize the parser; the last chunks, ending with the finish reason."""
        self.message, events = self.parser.finalize()
        return self.adapter.convert(events) + self.adapter.finish(finish_reason)

    def chat_message(self) -> dict[str, Any]:
        if self.message is None:
            raise RuntimeError("finish() the stream first")
        return to_chat_message(self.message, call_id=self.adapter.call_id)

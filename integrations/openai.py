"""OpenAI Chat Completions shapes for a parsed message and for a parser's event stream.

Servers that speak the Chat Completions API answer with an assistant message, or with
`chat.completion.chunk` objects whose deltas the client concatenates. `to_chat_message`
converts a parsed message; `ChunkAdapter` converts parser events into chunks; and
`CompletionStream` drives a Parser and an adapter together (`stream_chunks` does it over an
async token iterator). The two paths agree: the deltas of a stream merge (as an OpenAI
client merges them) into exactly the message `to_chat_message` returns for the stream's
final message, tool-call ids included when both paths use the same `call_id` factory.

Mapping (the rest of the message is dropped; the parsed message keeps it):
- `content` -> `content`, `thinking` -> `reasoning` (vLLM's name; `reasoning_key=
  "reasoning_content"` for older clients), when the value is a non-empty string; an empty
  or non-string value (an int or json parser's result, the list of a `repeats` field
  without `join`) is left out, so `content` is None;
- `tool_calls` -> a list of `{"id", "type": "function", "function": {"name", "arguments"}}`,
  `arguments` as a JSON string (`ensure_ascii=False`; a string is passed through, a missing
  one is `{}`). A value that is not a call (no `function` dict with a string `name`, e.g.
  the raw text `on_error="keep_raw"` stores) is left out: the message's `parse_errors`
  report it. (Under the server policy the parser itself fails a call without a name, so
  its text is content.) A `parse_errors` record with a `streamed_call` (see CompletionStream) is the
  part of a failed call a stream had already sent, and is listed at its index.

Known divergence: a field without `repeats` that occurs twice keeps only its last region in
the message (the template's semantics), while the stream has already sent the earlier
ones. A template's string `defaults` for content or thinking are not streamed either.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

from runtime.parser import OpenRegion
from runtime.tools import TOOL_CALLS

from .call_arguments import CallArguments, dump_json, plan_for

CallId = Callable[[int], str]
Chunk = dict[str, Any]

REASONING_KEYS = ("reasoning", "reasoning_content")
# How a stream sends tool-call arguments: as fragments while the call grows (where the
# template allows it, see integrations.call_arguments), or whole at the call's close.
TOOL_ARGS = ("fragments", "whole")
# The stream's parser policy: "server" never raises on model output (on_error="content"),
# "strict" raises as the parser does by default.
POLICIES = {"server": "content", "strict": "raise"}


def text_keys(reasoning_key: str = "reasoning") -> dict[str, str]:
    """The message keys of the text fields, and the Chat Completions keys they become."""
    if reasoning_key not in REASONING_KEYS:
        raise ValueError(f"reasoning_key must be one of {REASONING_KEYS}, got {reasoning_key!r}")
    return {"content": "content", "thinking": reasoning_key}


def default_call_id(index: int) -> str:
    """`call_0`, `call_1`, ...: deterministic, but repeated from one response to the next."""
    return f"call_{index}"


def random_call_ids() -> CallId:
    """An id factory for one response: a random prefix, so ids are unique across a chat.

    Create one per response and give it to both paths; they then agree on every id.
    """
    token = secrets.token_hex(6)
    return lambda index: f"call_{token}_{index}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """The `usage` object of a completion, from the caller's token counts."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def to_chat_message(
    message: dict[str, Any],
    *,
    call_id: CallId = default_call_id,
    reasoning_key: str = "reasoning",
) -> dict[str, Any]:
    """The Chat Completions assistant message for a parsed message (see the module docstring)."""
    keys = text_keys(reasoning_key)
    chat: dict[str, Any] = {"role": "assistant", "content": _text(message.get("content"))}
    thinking = _text(message.get("thinking"))
    if thinking is not None:
        chat[keys["thinking"]] = thinking
    functions: list[dict[str, Any]] = [
        function
        for function in map(_function, _tool_calls(message.get(TOOL_CALLS)))
        if function is not None
    ]
    for streamed in _streamed_calls(message):
        functions.insert(min(streamed["index"], len(functions)), streamed["function"])
    if functions:
        chat["tool_calls"] = [
            {"id": call_id(index), "type": "function", "function": function}
            for index, function in enumerate(functions)
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


def _function(call: Any) -> dict[str, Any] | None:
    """A call's `function` in the API's shape, or None for a value that is not a call."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = dump_json(arguments)
    return {"name": function["name"], "arguments": arguments}


def _streamed_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The partial calls a stream sent before their region failed, by index."""
    records = message.get("parse_errors")
    if not isinstance(records, list):
        return []
    streamed = [
        record["streamed_call"]
        for record in records
        if isinstance(record, dict) and isinstance(record.get("streamed_call"), dict)
    ]
    return sorted(streamed, key=lambda call: call["index"])


class _TextField:
    """Streaming state of one text field (content or thinking).

    The message value is only final at region_close: stripped (unless `"strip": false`) and,
    for `repeats` + `join`, appended to the earlier regions' values after the join string.
    Text is sent as it arrives, except what stripping may still remove (whitespace at the
    region's start, and at its end until more text follows); the join string goes out just
    before the region's first text. At close, whatever of the final value was not sent yet is.

    Under on_error="content", a failed call's text may take back the region that its
    opening closed (the parser undoes that region's value and goes on with it): `reopen`
    restores the state the close ended, as far as it was sent.
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
        self.closed: tuple[int, str, bool, bool] | None = None  # what reopen restores
        self.open()

    def open(self) -> None:
        self.sent = 0  # how much of this region's value was sent, join string included
        self.held = ""  # trailing whitespace not sent yet
        self.begun = False  # text other than whitespace seen
        self.joining = False  # the join string is sent

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
        self.begun = True
        if self.join is not None and self.joined and not self.joining:
            self.joining = True
            text = self.join + text
        self.sent += len(text)
        return text

    def close(self, value: Any) -> str:
        if not self.streamed:
            return ""
        joined = self.joined
        if self.join is not None:  # the parser has checked that value is a string
            final = (self.join if self.joined else "") + value
            self.joined = True
        else:
            final = value if isinstance(value, str) else ""
        # What was sent is always a prefix of `final`: the region's text, less what strip removes.
        rest = final[self.sent :]
        self.closed = (len(final), self.held, self.begun, joined)
        self.open()
        return rest

    def reopen(self) -> None:
        """Go on with the region the last close ended, its value undone."""
        if self.closed is None:
            return
        self.sent, self.held, self.begun, self.joined = self.closed
        self.joining = self.joined and self.join is not None
        self.closed = None


class _OpenCall:
    """Streaming state of one open tool-call region."""

    def __init__(self) -> None:
        self.parts: list[str] = []  # its text, until `arguments` reads it
        self.arguments: CallArguments | None = None
        self.index: int | None = None  # set once the call's first delta is sent
        self.name = ""
        self.sent: list[str] = []  # the argument fragments sent so far


class ChunkAdapter:
    """Turns one response's parser events into `chat.completion.chunk` dicts.

    Feed every event, the parser's `initial_events` and `finalize()` events included, to
    `convert`, then call `finish` once. The first chunk carries the role; text arrives as
    `content` / reasoning deltas. A tool call's first delta carries its `index`, `id`,
    `type` and `function.name` (and the arguments known so far); later deltas carry the
    `index` and `function.arguments` fragments. Fragments need `region` (see `convert`) and
    a template integrations.call_arguments can stream; otherwise each call is one delta at its close.
    The last chunk has an empty delta and the finish reason. Unknown event types and fields
    other than content, thinking and tool_calls are ignored.

    `errors` collects the parser's `region_error` records (and any `StreamDivergence`);
    `partial` the calls sent before their region failed (see CompletionStream).
    """

    def __init__(
        self,
        template: dict[str, Any],
        *,
        model: str = "",
        completion_id: str | None = None,
        created: int | None = None,
        call_id: CallId = default_call_id,
        reasoning_key: str = "reasoning",
        index: int = 0,
        include_usage: bool = False,
        tool_args: str = "fragments",
        tool_params: dict[str, dict[str, Any]] | None = None,
        report_errors: bool = False,
    ) -> None:
        if tool_args not in TOOL_ARGS:
            raise ValueError(f"tool_args must be one of {TOOL_ARGS}, got {tool_args!r}")
        self.id = completion_id or f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time()) if created is None else created
        self.model = model
        self.call_id = call_id
        self.index = index
        self.include_usage = include_usage
        self.report_errors = report_errors
        self.keys = text_keys(reasoning_key)
        fields = template.get("fields", {})
        defaults = template.get("defaults") or {}
        self._text = {
            name: _TextField(fields[name], defaults.get(name))
            for name in self.keys
            if name in fields
        }
        self.plan = plan_for(template) if tool_args == "fragments" else None
        self.tool_params = tool_params or {}
        self.errors: list[dict[str, Any]] = []
        self.partial: list[dict[str, Any]] = []  # parse_errors records with a streamed_call
        self._call: _OpenCall | None = None
        self._reopen: str | None = None  # a text field whose next region_open goes on
        self._calls = 0
        self._started = False
        self._logprobs: list[Any] = []
        self._reported: list[dict[str, Any]] = []

    def convert(
        self,
        events: Iterable[dict[str, Any]],
        *,
        region: OpenRegion | Callable[[], OpenRegion | None] | None = None,
        logprobs: Iterable[Any] | None = None,
    ) -> list[Chunk]:
        """The chunks for a list of events.

        `region`: when a tool-call region is open after these events, its captures and
        close function (CompletionStream passes them), which lets arguments stream as
        fragments; or a function that returns it (see `deltas`). `logprobs`: the entries
        (Chat Completions `logprobs.content` items) of the text these events came from; they
        ride on the first chunk this call returns, or on a later one if this text gave none
        yet.
        """
        if logprobs is not None:
            self._logprobs.extend(logprobs)
        return [self._chunk(delta) for delta in self.deltas(events, region=region)]

    def deltas(
        self,
        events: Iterable[dict[str, Any]],
        *,
        region: OpenRegion | Callable[[], OpenRegion | None] | None = None,
    ) -> list[dict[str, Any]]:
        """What `convert` puts in its chunks' `delta`s, without the chunks around them (the
        engine plugins build their engines' own objects from these).

        `region` may also be a function that returns it (`CompletionStream.open_call`): it
        is then asked only when a call's first text arrives, as only then are the region's
        captures and close function read; later, the call's own events tell that it is
        still open (a region_close or region_error ends it). Making the region object cost
        0.7 us a chunk, a tenth of this adapter's share of a streamed XML call.
        """
        deltas: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            deltas.append({"role": "assistant"})
        for event in events:
            kind, name = event.get("type"), event.get("field")
            text_field = self._text.get(name) if isinstance(name, str) else None
            if kind == "region_error":
                self._error(event)
                # The parser may take back the implicit region that this region's opening
                # closed (`resumed`, see runtime/regions.py).
                recovered = event.get("recovered_as")
                if recovered is not None and event.get("resumed"):
                    self._reopen = recovered
                continue
            if text_field is not None and isinstance(name, str):
                key = self.keys[name]
                if kind == "region_open":
                    if self._reopen == name:
                        text_field.reopen()
                    else:
                        text_field.open()
                    self._reopen = None
                elif kind == "region_chunk":
                    _add_text(deltas, key, text_field.chunk(event["text"]))
                elif kind == "region_close":
                    _add_text(deltas, key, text_field.close(event["value"]))
            elif name == TOOL_CALLS:
                if kind == "region_open":
                    self._call = _OpenCall()
                elif kind == "region_chunk" and self._call is not None:
                    if self._call.arguments is None:
                        self._call.parts.append(event["text"])
                    else:
                        self._call.arguments.add(event["text"])
                elif kind == "region_close":
                    self._close_call(deltas, event["value"])
        if self._call is not None and region is not None and self.plan is not None:
            self._grow_call(deltas, region)
        return deltas

    def finish(
        self, finish_reason: str | None = None, *, usage: dict[str, int] | None = None
    ) -> list[Chunk]:
        """The closing chunk; the reason defaults to "tool_calls" if any call was sent, else
        "stop". With `include_usage`, `usage` goes in a last chunk with no choices (the API's
        shape for `stream_options.include_usage`; with n > 1, one choice's adapter sends it:
        give `usage` to that one's finish only); without, `usage` is not sent."""
        chunks = self.convert(())  # the role chunk, if nothing came before
        reason = finish_reason or ("tool_calls" if self._calls else "stop")
        chunks.append(self._chunk({}, reason))
        if usage is not None and self.include_usage:
            last = self._envelope()
            last["choices"] = []
            last["usage"] = dict(usage)
            chunks.append(last)
        return chunks

    # -- tool calls ------------------------------------------------------------------------

    def _grow_call(
        self,
        deltas: list[dict[str, Any]],
        region: OpenRegion | Callable[[], OpenRegion | None],
    ) -> None:
        """Send what the open call's text so far fixes: its name, then argument fragments."""
        call = self._call
        assert call is not None and self.plan is not None
        if call.arguments is None:
            if callable(region):
                found = region()
                if found is None:
                    return
                region = found
            call.arguments = CallArguments(
                self.plan, region.captures, region.close, self.tool_params
            )
            call.arguments.add("".join(call.parts))
            call.parts = []
        if call.index is None:
            name = call.arguments.name()
            if name is None:
                return
            call.index, call.name = self._calls, name
            self._calls += 1
            piece = call.arguments.advance(name)
            call.sent.append(piece)
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": call.index,
                            "id": self.call_id(call.index),
                            "type": "function",
                            "function": {"name": name, "arguments": piece},
                        }
                    ]
                }
            )
            return
        piece = call.arguments.advance(call.name)
        if piece:
            call.sent.append(piece)
            self._fragment(deltas, call.index, piece)

    def _fragment(self, deltas: list[dict[str, Any]], index: int, text: str) -> None:
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": text}}]})

    def _close_call(self, deltas: list[dict[str, Any]], value: Any) -> None:
        call, self._call = self._call, None
        functions = [f for f in map(_function, _tool_calls(value)) if f is not None]
        if call is not None and call.index is not None:
            # The call was already announced: send the rest of its arguments.
            if not functions or functions[0]["name"] != call.name:
                self._diverged(call, "the closed region is not the announced call")
                return
            final = functions.pop(0)["arguments"]
            sent = "".join(call.sent)
            if not final.startswith(sent):
                self._diverged(call, "a repeated argument key changed a value already sent")
            elif final[len(sent) :]:
                self._fragment(deltas, call.index, final[len(sent) :])
        for function in functions:
            index = self._calls
            self._calls += 1
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": self.call_id(index),
                            "type": "function",
                            "function": function,
                        }
                    ]
                }
            )

    def _error(self, event: dict[str, Any]) -> None:
        record = {key: value for key, value in event.items() if key != "type"}
        call = self._call
        if event.get("field") == TOOL_CALLS and call is not None:
            self._call = None
            if call.index is not None:
                # Sent deltas cannot be taken back: the call stays, as far as it was sent
                # (vLLM's and SGLang's streams do the same); its raw text also goes to
                # content, as the parser's policy says.
                record["streamed_call"] = {
                    "index": call.index,
                    "function": {"name": call.name, "arguments": "".join(call.sent)},
                }
                self.partial.append(record)
        self.errors.append(record)
        self._reported.append(record)

    def _diverged(self, call: _OpenCall, message: str) -> None:
        record = {
            "field": TOOL_CALLS,
            "offset": None,
            "error": {"type": "StreamDivergence", "message": f"call {call.index}: {message}"},
            "raw": None,
        }
        self.errors.append(record)
        self._reported.append(record)

    # -- chunks ----------------------------------------------------------------------------

    def _envelope(self) -> Chunk:
        chunk: Chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
        logprobs = None
        if self._logprobs:
            logprobs = {"content": self._logprobs}
            self._logprobs = []
        chunk = self._envelope()
        chunk["choices"] = [
            {
                "index": self.index,
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        ]
        if self.report_errors and self._reported:
            chunk["parse_errors"] = self._reported  # non-standard: for the server's log
            self._reported = []
        return chunk


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
    """A Parser and a ChunkAdapter for one response (one choice): text in, chunks out.

    `parser` is a generated Parser class (built here with `prefix`, `tools` and the
    policy's `on_error`) or an instance nothing has been fed to yet. `policy="server"` (the
    default) never raises on model output: a tool call that does not parse (truncated, bad
    JSON, no name) reaches the client as content text, and the failure is recorded in
    `errors` (and, with `report_errors=True`, in a non-standard `parse_errors` chunk key).
    `policy="strict"` raises as the parser does. `initial` holds the chunks of the parser's
    `initial_events`, led by the role chunk; after `finish`, `message` is the parsed
    message and `chat_message()` its non-streaming conversion, with the same tool-call ids.

    A call whose name and argument fragments were sent before its region failed cannot be
    taken back: the client keeps it as sent, and `message["parse_errors"]` marks it with a
    `streamed_call` record, which `to_chat_message` lists as that call. So the merged
    deltas equal `chat_message()` in every case.
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
        policy: str | None = None,
        reasoning_key: str = "reasoning",
        index: int = 0,
        include_usage: bool = False,
        tool_args: str = "fragments",
        report_errors: bool = False,
    ) -> None:
        if isinstance(parser, type):
            policy = "server" if policy is None else policy
            if policy not in POLICIES:
                raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {policy!r}")
            parser = parser(prefix, tools=tools, on_error=POLICIES[policy])
        elif prefix is not None or tools is not None or policy is not None:
            raise TypeError("prefix, tools and policy are for a Parser class, not an instance")
        self.parser = parser
        self.adapter = ChunkAdapter(
            template if template is not None else template_of(type(parser)),
            model=model,
            completion_id=completion_id,
            created=created,
            call_id=call_id,
            reasoning_key=reasoning_key,
            index=index,
            include_usage=include_usage,
            tool_args=tool_args,
            tool_params=parser.tool_parameters,
            report_errors=report_errors,
        )
        self.message: dict[str, Any] | None = None
        self.initial = self.adapter.convert(parser.initial_events, region=self.open_call())

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The parse failures recovered from so far (the server may log them)."""
        return self.adapter.errors

    def feed(self, text: str, logprobs: Iterable[Any] | None = None) -> list[Chunk]:
        """The chunks `text` completes; `logprobs` are its tokens' entries, if requested."""
        events = self.parser.feed(text)
        return self.adapter.convert(events, region=self.open_call, logprobs=logprobs)

    def finish(
        self, finish_reason: str | None = None, *, usage: dict[str, int] | None = None
    ) -> list[Chunk]:
        """Finalize the parser; the last chunks, ending with the finish reason (and `usage`,
        if given, in a chunk of its own). With finish_reason "length" the output was cut off:
        a tool call still open at its end is incomplete and, under the server policy, goes
        into content (`finalize(truncated=True)`)."""
        message, events = self.parser.finalize(truncated=finish_reason == "length")
        chunks = self.adapter.convert(events) + self.adapter.finish(finish_reason, usage=usage)
        self.message = _mark_streamed(message, self.adapter.partial)
        return chunks

    def chat_message(self) -> dict[str, Any]:
        if self.message is None:
            raise RuntimeError("finish() the stream first")
        return to_chat_message(
            self.message,
            call_id=self.adapter.call_id,
            reasoning_key=self.adapter.keys["thinking"],
        )

    def open_call(self) -> OpenRegion | None:
        """The open tool-call region, if one is open (for `ChunkAdapter.convert`)."""
        region: OpenRegion | None = self.parser.open_region()
        return region if region is not None and region.field == TOOL_CALLS else None


def _mark_streamed(message: dict[str, Any], partial: list[dict[str, Any]]) -> dict[str, Any]:
    """The message, its parse_errors records of partly streamed calls marked as such."""
    if not partial:
        return message
    records = [dict(record) for record in message.get("parse_errors", [])]
    for sent in partial:
        for record in records:
            if (
                "streamed_call" not in record
                and record.get("field") == sent["field"]
                and record.get("offset") == sent["offset"]
            ):
                record["streamed_call"] = sent["streamed_call"]
                break
    return {**message, "parse_errors": records}


async def stream_chunks(
    parser: Any,
    prefix: str | None,
    tokens: AsyncIterable[Any],
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    **options: Any,
) -> AsyncIterator[Chunk]:
    """`async for chunk in stream_chunks(Parser, prompt, tokens)`: the chunks of one response.

    `tokens` yields text pieces, or `(text, logprobs)` pairs; `options` are
    CompletionStream's. The finish reason and usage are known when the tokens end.
    """
    stream = CompletionStream(parser, prefix, **options)
    for chunk in stream.initial:
        yield chunk
    async for item in tokens:
        text, logprobs = item if isinstance(item, tuple) else (item, None)
        for chunk in stream.feed(text, logprobs):
            yield chunk
    for chunk in stream.finish(finish_reason, usage=usage):
        yield chunk

"""SGLang tool-call and reasoning detectors backed by the compiled response parsers.

    sglang serve --model-path MODEL --tool-call-parser rtc-qwen3_coder \\
        --reasoning-parser rtc-qwen3_coder

SGLang runs the general plugins of the `sglang.srt.plugins` entry-point group before it
parses its arguments; this package declares `integrations.sglang:register_all` there, so
installing it (`pip install -e '.[sglang]'`) is enough. Importing this module registers the
same too: for every catalog entry NAME, a `BaseFormatDetector` named `rtc-NAME` in
`FunctionCallParser.ToolCallParserEnum` and a reasoning detector of the same name in
`ReasoningParser.DetectorMap`. `register(template, name)` does it for any template (dict,
or catalog entry / tokenizer_config.json path); `RTC_RESPONSE_TEMPLATE=path` registers
`rtc-template`.

As SGLang's chat serving composes them: the reasoning detector turns the thinking into
reasoning text and hands the raw text after it on as normal text; the tool detector turns
that into normal text and `ToolCallItem`s (the call's name first, with its ordinal as
`tool_index`, then `parameters` as `integrations.openai.CompletionStream` sends the arguments).
A call that does not parse stays normal text (the server policy). Plain detectors get no
prompt from SGLang: `force_reasoning` (which SGLang sets when the chat template opened the
thinking) stands for a prompt that ends inside the thinking region. Special tokens must
reach the detectors: serve with `skip_special_tokens: false` in the requests (or a chat
template that keeps them), as for SGLang's own detectors of special-token formats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import regex
from pydantic import ConfigDict
from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, ToolCallItem
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser
from sglang.srt.parser.reasoning_parser import StreamingParseResult as ReasoningResult

from integrations.serving import (
    THINKING,
    Delta,
    ReasoningStream,
    ResponseStream,
    catalog_names,
    parse_whole,
    parser_for,
    record_call,
    shape_of,
    without_thinking,
)

PREFIX = "rtc-"
TEMPLATE_ENV = "RTC_RESPONSE_TEMPLATE"
TOOL_CALLS = "tool_calls"

__all__ = ["PREFIX", "RtcDetector", "RtcReasoningDetector", "register", "register_all"]


def _first_literal(spec: dict[str, Any], kind: str) -> str:
    value = spec.get(kind)
    value = value[0] if isinstance(value, list) and value else value
    return value if isinstance(value, str) else ""


def _no_id(index: int) -> str:
    """A call's id: SGLang's `ToolCallItem` has none (its server makes the ids), so the
    random ids integrations.serving would make are not needed."""
    return ""


def _anchor(template: dict[str, Any]) -> str:
    """The template's (first) literal start anchor, "" without one."""
    anchor = template.get("start_anchor") or ""
    anchor = anchor[0] if isinstance(anchor, list) and anchor else anchor
    return anchor if isinstance(anchor, str) else ""


def _opener(spec: dict[str, Any]) -> regex.Pattern[str] | None:
    pattern = spec.get("open_pattern")
    if isinstance(pattern, str):
        return regex.compile(pattern, regex.DOTALL)
    literal = spec.get("open")
    literals = [literal] if isinstance(literal, str) else list(literal or ())
    return regex.compile("|".join(map(regex.escape, literals))) if literals else None


@dataclass(frozen=True)
class _ToolSetup:
    """A tool detector class's parser and delimiters (the same for all its requests)."""

    parser: type[Any]
    opener: regex.Pattern[str] | None
    bot_token: str
    eot_token: str


@dataclass(frozen=True)
class _ReasoningSetup:
    """A reasoning detector class's parser, thinking delimiters and start anchor."""

    parser: type[Any]
    think_start: str
    think_end: str
    anchor: str


class _NothingNew(StreamingParseResult):
    """The result of a step that adds nothing, one shared instance, frozen (and its `calls`
    a tuple) so that no caller can change it for the next step. SGLang's FunctionCallParser
    only reads a result's `normal_text` and `calls`; most chunks of a streamed call add
    nothing, and a fresh pydantic result cost 0.9 us a chunk."""

    model_config = ConfigDict(frozen=True)


_NOTHING_NEW = _NothingNew.model_construct(normal_text="", calls=())


# Keyed by the detector class: `register` makes one per name and template source.
_TOOL_SETUPS: dict[type[Any], _ToolSetup] = {}
_REASONING_SETUPS: dict[type[Any], _ReasoningSetup] = {}


class RtcDetector(BaseFormatDetector):
    """Normal text and tool calls, by one compiled parser per response (see the module doc)."""

    source: Any = None

    def __init__(self, tokenizer: Any = None) -> None:
        super().__init__()
        setup = _TOOL_SETUPS.get(type(self))
        if setup is None:  # once per registered name: SGLang makes a detector per request
            parser = without_thinking(parser_for(self.source))
            spec = shape_of(parser).template.get("fields", {}).get(TOOL_CALLS) or {}
            setup = _TOOL_SETUPS[type(self)] = _ToolSetup(
                parser, _opener(spec), _first_literal(spec, "open"), _first_literal(spec, "close")
            )
        self.parser = setup.parser
        self.opener = setup.opener
        self.bot_token = setup.bot_token
        self.eot_token = setup.eot_token
        self.stream: ResponseStream | None = None
        # The last output parsed without tools, and its delta (see `_whole`).
        self.parsed: tuple[str, Delta] | None = None

    @classmethod
    def parses_without_tools(cls) -> bool:
        return True  # a call to a tool the request did not list still is a call, not text

    def has_tool_call(self, text: str) -> bool:
        """Whether the one-shot path must run: a call opens, or parsing changes the text
        (SGLang's non-streaming serving keeps the text as is otherwise, delimiters and all)."""
        if self.opener is None or self.opener.search(text) is not None:
            return True
        return self._whole(text, None).content != text

    def supports_structural_tag(self) -> bool:
        return False

    def structure_info(self) -> Any:
        raise NotImplementedError("rtc detectors give no structural tag: formats vary")

    def detect_and_parse(self, text: str, tools: list[Any]) -> StreamingParseResult:
        delta = self._whole(text, tools or None)
        return StreamingParseResult(
            normal_text=delta.content,
            calls=[
                ToolCallItem(tool_index=call.index, name=call.name, parameters=call.arguments)
                for call in delta.calls
            ],
        )

    def _whole(self, text: str, tools: list[Any] | None) -> Delta:
        """`parse_whole` of `text`. SGLang's one-shot path asks `has_tool_call` twice, then
        parses, all of the same output: where no call opens, each asks for a parse (whether
        it changes the text). The parse without tools is kept for the next question, and
        answers the parse with tools too when it found no call (tools only cast a call's
        arguments): one parse instead of three (hermes, 20 characters after a long
        reasoning: 31 -> 12 us a request)."""
        parsed = self.parsed
        if parsed is not None and parsed[0] == text and (tools is None or not parsed[1].calls):
            return parsed[1]
        delta = parse_whole(self.parser, text, tools=tools, call_id=_no_id)
        if tools is None:
            self.parsed = (text, delta)
        return delta

    def parse_streaming_increment(self, new_text: str, tools: list[Any]) -> StreamingParseResult:
        if self.stream is None:
            self.stream = ResponseStream(self.parser, tools=tools, call_id=_no_id)
        return self._result(self.stream.feed(new_text))

    def finish(self, tools: list[Any]) -> StreamingParseResult:
        if self.stream is None:
            return StreamingParseResult()
        return self._result(self.stream.finish())

    def _result(self, delta: Delta) -> StreamingParseResult:
        """The delta as SGLang's result, keeping the detector's per-call bookkeeping."""
        if not delta:
            return _NOTHING_NEW
        items = []
        for call in delta.calls:
            current: int = getattr(self, "current_tool_id", -1)
            self.current_tool_id = max(current, call.index)
            record_call(self.streamed_args_for_tool, self.prev_tool_call_arr, call)
            items.append(
                ToolCallItem(tool_index=call.index, name=call.name, parameters=call.arguments)
            )
        sent: bool = getattr(self, "current_tool_name_sent", False)
        self.current_tool_name_sent = bool(items) or sent
        return StreamingParseResult(normal_text=delta.content, calls=items)


class RtcReasoningDetector(BaseReasoningFormatDetector):
    """Thinking as reasoning text; the raw text after it as normal text (see the module doc)."""

    source: Any = None

    def __init__(
        self, stream_reasoning: bool = True, force_reasoning: bool = False, **_: Any
    ) -> None:
        setup = _REASONING_SETUPS.get(type(self))
        if setup is None:  # once per registered name: SGLang makes a detector per request
            parser = parser_for(self.source)
            template = shape_of(parser).template
            spec = template.get("fields", {}).get(THINKING) or {}
            setup = _REASONING_SETUPS[type(self)] = _ReasoningSetup(
                parser,
                _first_literal(spec, "open"),
                _first_literal(spec, "close"),
                _anchor(template),
            )
        self.parser = setup.parser
        super().__init__(
            setup.think_start,
            setup.think_end,
            force_reasoning=force_reasoning,
            stream_reasoning=stream_reasoning,
        )
        # A prompt that ends inside the thinking: the start anchor and the thinking opener.
        self.prefix = setup.anchor + self.think_start_token if force_reasoning else ""
        self.stream: ReasoningStream | None = None
        self.held: list[str] = []  # reasoning kept for one piece when not streaming it

    def detect_and_parse(self, text: str) -> ReasoningResult:
        stream = ReasoningStream(self.parser, self.prefix)
        first, last = stream.feed(text), stream.finish()
        return ReasoningResult(
            normal_text=first.content + last.content,
            reasoning_text=first.reasoning + last.reasoning,
        )

    def parse_streaming_increment(self, new_text: str) -> ReasoningResult:
        if self.stream is None:
            self.stream = ReasoningStream(self.parser, self.prefix)
        return self._result(self.stream.feed(new_text))

    def finish(self) -> ReasoningResult:
        if self.stream is None:
            return ReasoningResult()
        return self._result(self.stream.finish(), end=True)

    def _result(self, delta: Delta, end: bool = False) -> ReasoningResult:
        reasoning = delta.reasoning
        if not self.stream_reasoning:  # one piece, once the thinking has ended
            if reasoning:
                self.held.append(reasoning)
            ended = end or (self.stream is not None and self.stream.ended)
            reasoning = ""
            if ended:
                reasoning, self.held = "".join(self.held), []
        self._in_reasoning = self.stream is not None and not self.stream.ended
        return ReasoningResult(normal_text=delta.content, reasoning_text=reasoning)


def register(source: Any, name: str) -> tuple[type[Any], type[Any]]:
    """Register a tool-call detector and a reasoning detector named `name` for a template
    source (catalog name, template dict or path)."""
    label = name.replace("-", "_")
    tool = type(f"RtcDetector_{label}", (RtcDetector,), {"source": source})
    reasoning = type(f"RtcReasoningDetector_{label}", (RtcReasoningDetector,), {"source": source})
    FunctionCallParser.ToolCallParserEnum[name] = tool
    ReasoningParser.DetectorMap[name] = reasoning
    return tool, reasoning


def register_all() -> None:
    """Every catalog entry as rtc-NAME (SGLang's general-plugin hook; idempotent)."""
    for entry in catalog_names():
        register(entry, PREFIX + entry)
    path = os.environ.get(TEMPLATE_ENV)
    if path:
        register(path, PREFIX + "template")


register_all()

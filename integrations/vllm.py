"""vLLM tool and reasoning parsers backed by the compiled response parsers.

    vllm serve MODEL --tool-parser-plugin integrations.vllm \\
        --enable-auto-tool-choice --tool-call-parser rtc-qwen3_coder \\
        --reasoning-parser-plugin integrations.vllm --reasoning-parser rtc-qwen3_coder

Importing this module (vLLM does, for `--tool-parser-plugin`) registers, for every catalog
entry NAME, a `ToolParser` and a `ReasoningParser` named `rtc-NAME` with vLLM's
`ToolParserManager` and `ReasoningParserManager`; `rtc` names the pair that compiles the
served tokenizer's own `response_template` (the catalog module with the same template hash,
else a just-in-time class). `register(template, name)` does the same for any template (a
dict, a catalog entry or tokenizer_config.json path); `RTC_RESPONSE_TEMPLATE=path` in the
environment registers that file as `rtc-template` at import.

vLLM composes the two halves into its `DelegatingParser`, as it does its own pairs: the
reasoning parser (given the rendered prompt, so thinking that the chat template opened is
seen) turns the thinking into `reasoning` deltas and hands the raw text after it on; the
tool parser turns that into `content` deltas and tool calls: the name first, with a stable
`index` and `id`, then `arguments` as `integrations.openai.CompletionStream` sends them. Both are
"engine based" in vLLM's sense: vLLM tells them when the stream ends (`finish_streaming`),
so nothing held back for a possible delimiter is lost. The server policy applies: a call
that does not parse reaches the client as content. `adjust_request` keeps special tokens
in the text (`skip_special_tokens=False`), since templates delimit with them.

The plugin can be given as the module name (`integrations.vllm`) or as this file's path:
vLLM imports a plugin file under its base name, which here puts this file in vLLM's place in
`sys.modules`, so the file puts vLLM back first (`_restore_vllm`).
"""

# ruff: noqa: E402  (vLLM must be back in place before the imports from it, see below)
from __future__ import annotations

import importlib
import sys


def _restore_vllm() -> None:
    """Put vLLM back in `sys.modules["vllm"]` after vLLM imported this file by its path.

    vLLM loads a plugin file under its base name, so this file first runs as the module
    `vllm`, in vLLM's place. A fresh import of the package takes the place back; the
    submodules already loaded are set on it again, as the first import had them.
    """
    del sys.modules["vllm"]
    package = importlib.import_module("vllm")
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.") and name.count(".") == 1 and module is not None:
            setattr(package, name.split(".", 1)[1], module)


if __name__ == "vllm":  # --tool-parser-plugin path/to/integrations/vllm.py
    _restore_vllm()

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning import ReasoningParser, ReasoningParserManager
from vllm.renderers.chat_utils.tool_call import make_tool_call_id
from vllm.tool_parsers import ToolParser, ToolParserManager

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
    split_reasoning,
    without_thinking,
)

PREFIX = "rtc-"
TEMPLATE_ENV = "RTC_RESPONSE_TEMPLATE"

__all__ = ["PREFIX", "RtcReasoningParser", "RtcToolParser", "register"]


def _decode(tokenizer: Any, token_ids: Sequence[int]) -> str:
    """Token ids as text, special tokens kept (the templates' delimiters are often such)."""
    try:
        text: str = tokenizer.decode(
            list(token_ids),
            skip_special_tokens=False,
            clean_up_tokenization_spaces=False,
            spaces_between_special_tokens=False,
        )
    except TypeError:
        text = tokenizer.decode(list(token_ids), skip_special_tokens=False)
    return text


def _tokenizer_template(tokenizer: Any) -> Any:
    """The tokenizer's `response_template` (attribute or init kwarg), for the `rtc` name."""
    template = getattr(tokenizer, "response_template", None)
    if not isinstance(template, dict):
        template = (getattr(tokenizer, "init_kwargs", None) or {}).get("response_template")
    if not isinstance(template, dict):
        raise TypeError("the `rtc` parsers need `response_template` in the tokenizer config")
    return template


def _call_id(index: int) -> str:
    """vLLM's own random tool-call id."""
    call_id: str = make_tool_call_id()
    return call_id


_RESOLVED: dict[Any, type[Any]] = {}


def _parser(source: Any, tokenizer: Any) -> type[Any]:
    """The Parser class of a registered source; None: the tokenizer's template.

    A catalog name or path is resolved once (vLLM makes parsers per request); a template
    dict or the tokenizer's is resolved by its hash, which `parser_for` caches.
    """
    if source is None:
        return parser_for(_tokenizer_template(tokenizer))
    if not isinstance(source, (str, Path)):
        return parser_for(source)
    parser = _RESOLVED.get(source)
    if parser is None:
        parser = _RESOLVED[source] = parser_for(source)
    return parser


def _delta_message(delta: Delta) -> DeltaMessage | None:
    if not delta:
        return None
    calls = [
        DeltaToolCall(
            index=call.index,
            id=call.id,
            type="function" if call.id is not None else None,
            function=DeltaFunctionCall(name=call.name, arguments=call.arguments or None),
        )
        for call in delta.calls
    ]
    return DeltaMessage(
        reasoning=delta.reasoning or None, content=delta.content or None, tool_calls=calls
    )


class RtcToolParser(ToolParser):
    """Content and tool calls, by one compiled parser per response (see the module doc)."""

    source: ClassVar[Any] = None  # a catalog name, a template or a path; None: the tokenizer's
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self.parser = without_thinking(_parser(self.source, tokenizer))
        self.request_tools = tools
        self.stream: ResponseStream | None = None

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        request.skip_special_tokens = False
        if hasattr(request, "spaces_between_special_tokens"):
            request.spaces_between_special_tokens = False
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        delta = parse_whole(self.parser, model_output, tools=self._tools(request), call_id=_call_id)
        calls = [
            ToolCall(
                id=call.id, function=FunctionCall(name=call.name or "", arguments=call.arguments)
            )
            for call in delta.calls
        ]
        self.prev_tool_call_arr = [
            {"name": call.function.name, "arguments": call.function.arguments} for call in calls
        ]
        return ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=delta.content or None
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> Any:
        if self.stream is None:
            self.stream = ResponseStream(self.parser, tools=self._tools(request), call_id=_call_id)
        return self._track(self.stream.feed(delta_text))

    def finish_streaming(self) -> Any:
        """The end of the stream: held-back text, and a call the output cut off."""
        if self.stream is None:
            return None
        return self._track(self.stream.finish())

    def _tools(self, request: Any) -> Any:
        return getattr(request, "tools", None) or self.request_tools

    @staticmethod
    def _merge(delta: Delta, part: Any) -> None:
        for call in delta.calls:
            if call.index == part.index:
                call.arguments += part.arguments
                call.name = call.name or part.name
                call.id = call.id or part.id
                return
        delta.calls.append(part)

    def _track(self, delta: Delta) -> DeltaMessage | None:
        """Keep vLLM's bookkeeping (what each call's arguments sent so far) up to date."""
        for call in delta.calls:
            current: int = getattr(self, "current_tool_id", -1)
            self.current_tool_id = max(current, call.index)
            record_call(self.streamed_args_for_tool, self.prev_tool_call_arr, call)
        self.current_tool_name_sent = self.current_tool_id >= 0
        return _delta_message(delta)


class RtcReasoningParser(ReasoningParser):
    """Thinking as reasoning; the raw text after it handed on (see the module doc)."""

    source: ClassVar[Any] = None
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self.parser = _parser(self.source, tokenizer)
        self.prefix = ""
        self.prompt_ids: list[int] | None = None
        self.stream: ReasoningStream | None = None

    @property
    def reasoning_start_str(self) -> str | None:
        return self._literal("open")

    @property
    def reasoning_end_str(self) -> str | None:
        return self._literal("close")

    def _literal(self, kind: str) -> str | None:
        spec = shape_of(self.parser).template.get("fields", {}).get(THINKING) or {}
        value = spec.get(kind)
        value = value[0] if isinstance(value, list) and value else value
        return value if isinstance(value, str) else None

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self.prompt_ids = list(prompt_token_ids)
        self.prefix = _decode(self.model_tokenizer, prompt_token_ids)
        self.stream = None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether the text of `input_ids` (a prompt, or a prompt and output) has left the
        thinking: a thinking region closed, or another region opened, after the last anchor.

        Not for the prompt this parser was given, when that prompt opened a region with an
        open delimiter (a content channel): the tool half needs the delimiter, which only
        this half can hand on, so vLLM must run it (it asks right after set_prompt_token_ids).
        """
        if self.prompt_ids is not None and list(input_ids) == self.prompt_ids:
            if ReasoningStream(self.parser, self.prefix).lead:
                return False
        try:
            events = self.parser(_decode(self.model_tokenizer, input_ids)).initial_events
        except Exception:
            return False
        ended = False
        for event in events:
            if event["type"] == "region_open":
                ended = event["field"] != THINKING
            elif event["type"] == "region_close" and event["field"] == THINKING:
                ended = True
        return ended

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Any) -> bool:
        if self.stream is not None:
            return self.stream.ended
        return self.is_reasoning_end(input_ids)

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self.stream is not None and self.stream.ended

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return input_ids  # the tool half works on the text handed on, not on ids

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        reasoning, rest = split_reasoning(self.parser, model_output, self.prefix)
        return reasoning, rest or None

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> Any:
        if self.stream is None:
            self.stream = ReasoningStream(self.parser, self.prefix)
        return _delta_message(self.stream.feed(delta_text))

    def finish_streaming(self) -> Any:
        """The end of the stream, or of the reasoning (vLLM asks at that transition too).

        At the end of a stream whose reasoning never ended (its first region stayed held,
        or the output stopped inside the thinking), vLLM sends what this returns as it is,
        without a tool phase: the text handed on is parsed here by a tool half of its own.
        """
        if self.stream is None:
            return None
        ended = self.stream.ended
        delta = self.stream.finish()
        if not ended and delta.content:
            tools = ResponseStream(without_thinking(self.parser), call_id=_call_id)
            rest = tools.feed(delta.content)
            end = tools.finish()
            delta.content = rest.content + end.content
            delta.calls = rest.calls
            for part in end.calls:
                RtcToolParser._merge(delta, part)
        return _delta_message(delta)


def register(source: Any, name: str) -> tuple[type[Any], type[Any]]:
    """Register a tool parser and a reasoning parser named `name` for a template source
    (catalog name, template dict or path; None: the served tokenizer's template)."""
    label = name.replace("-", "_")
    tool = type(f"RtcToolParser_{label}", (RtcToolParser,), {"source": source})
    reasoning = type(f"RtcReasoningParser_{label}", (RtcReasoningParser,), {"source": source})
    ToolParserManager.register_module(name=name, module=tool)
    ReasoningParserManager.register_module(name=name, module=reasoning)
    return tool, reasoning


def _register_all() -> None:
    register(None, PREFIX.rstrip("-"))
    for entry in catalog_names():
        register(entry, PREFIX + entry)
    path = os.environ.get(TEMPLATE_ENV)
    if path:
        register(path, PREFIX + "template")


_register_all()

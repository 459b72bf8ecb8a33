"""Engine-neutral streaming for serving-engine plugins (vLLM, SGLang).

Serving engines split output parsing in two: a reasoning parser that separates the thinking
from the rest, then a tool parser that separates content from tool calls in that rest. The
compiled parsers parse a whole message in one pass, so each half is one compiled parser run
with the server policy (`on_error="content"`: a call that does not parse reaches the client
as content, as the engines' own parsers do):

- `ResponseStream` (the tool half): text in, `Delta`s out, built from the Chat Completions
  deltas of `integrations.openai.CompletionStream` (content, reasoning under either key name,
  tool calls with stable index and id, arguments whole or as fragments, whichever that
  module sends);
- `ReasoningStream` (the reasoning half): the thinking as reasoning deltas until the thinking
  region ends, then the raw text after it, for the tool half.

`parser_for` resolves a catalog entry name, a template dict or a template path to a Parser
class. Nothing here imports an engine; `integrations.vllm` and `integrations.sglang` adapt
these to each engine's classes.
"""

from __future__ import annotations

import copy
import json
import secrets
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from integrations.openai import ChunkAdapter, CompletionStream, template_of, to_chat_message
from runtime.automaton import find_literal

THINKING = "thinking"
REASONING_KEYS = ("reasoning", "reasoning_content")
# The server policy: a region that fails to parse is routed into content, nothing raises.
ON_ERROR = "content"
# The completion id of the adapters here, whose chunks the plugins turn into Deltas.
UNUSED_ID = "chatcmpl-rtc"


def catalog_names() -> list[str]:
    """The catalog entries that have a generated module, sorted."""
    import templates_catalog

    return sorted(templates_catalog.names())


def parser_for(source: Any) -> type[Any]:
    """The Parser class for a catalog entry name, a template dict, or a template file path.

    A name resolves to `generated.NAME.Parser`; a dict (a template, a catalog entry or a
    tokenizer_config.json with a `response_template`) or a path to the catalog module with
    the same template hash, else a class compiled just in time.
    """
    if isinstance(source, str) and not source.endswith(".json") and "/" not in source:
        import importlib

        module = importlib.import_module(f"generated.{source}")
        parser: type[Any] = module.Parser
        return parser
    from integrations.transformers import parser_class

    template = source
    if isinstance(source, (str, Path)):
        template = json.loads(Path(source).read_text(encoding="utf-8"))
    if isinstance(template, dict) and isinstance(template.get("response_template"), dict):
        template = template["response_template"]
    return parser_class(template)


_REDUCED: dict[type[Any], type[Any]] = {}


def without_thinking(parser: type[Any]) -> type[Any]:
    """The parser of the same template less its thinking field: the tool half's parser.

    The tool half sees the text after the thinking (the reasoning half took that), or, with
    no reasoning half, the whole output, whose thinking markup then stays content, as the
    engines keep it without a reasoning parser. Compiled just in time, once per template.
    """
    reduced_parser = _REDUCED.get(parser)
    if reduced_parser is None:
        reduced_parser = _REDUCED[parser] = _reduce(parser)
    return reduced_parser


def _reduce(parser: type[Any]) -> type[Any]:
    template = template_of(parser)
    if THINKING not in template.get("fields", {}):
        return parser
    from compiler import TemplateError

    reduced = copy.deepcopy(template)
    del reduced["fields"][THINKING]
    if isinstance(reduced.get("defaults"), dict):
        reduced["defaults"].pop(THINKING, None)
    try:
        return parser_for(reduced)
    except TemplateError:
        return parser  # a template whose other fields need it: parse thinking as reasoning


def random_call_id(index: int) -> str:
    """An OpenAI-style tool-call id (`chatcmpl-tool-` and 32 hex digits, as vLLM makes them)."""
    return f"chatcmpl-tool-{secrets.token_hex(16)}"


@dataclass(frozen=True)
class Shape:
    """What the plugins read from a Parser class's template, worked out once per class.

    Every request builds a parser, and the engines build a detector per request too; the
    template's delimiter regexes and field facts are the same for all of them, so they
    are kept here (`shape_of`), keyed by the class, which holds its template for good.
    """

    template: dict[str, Any]
    has_thinking: bool
    open: regex.Pattern[str] | None  # the thinking field's open delimiter
    close: regex.Pattern[str] | None  # and its close delimiter
    open_texts: tuple[str, ...]  # the open delimiter's literals (none for a pattern)
    single: frozenset[str]  # content, thinking, tool_calls fields without `repeats`
    text_defaults: bool  # a string default for content or thinking (never streamed)


# Weakly keyed: a Parser class compiled at run time (compiler.load_parser) is not kept alive.
_SHAPES: weakref.WeakKeyDictionary[type[Any], Shape] = weakref.WeakKeyDictionary()


def shape_of(parser: type[Any]) -> Shape:
    """The `Shape` of a Parser class (computed on first use, then shared: it is read only)."""
    shape = _SHAPES.get(parser)
    if shape is None:
        template = template_of(parser)
        fields = template.get("fields", {})
        spec = fields.get(THINKING) or {}
        defaults = template.get("defaults")
        defaults = defaults if isinstance(defaults, dict) else {}
        shape = _SHAPES[parser] = Shape(
            template=template,
            has_thinking=THINKING in fields,
            open=_alternatives(spec, "open"),
            close=_alternatives(spec, "close"),
            open_texts=() if "open_pattern" in spec else _literals(spec.get("open")),
            single=frozenset(
                name
                for name in ("content", THINKING, "tool_calls")
                if name in fields and not fields[name].get("repeats")
            ),
            text_defaults=any(
                isinstance(defaults.get(name), str) for name in ("content", THINKING)
            ),
        )
    return shape


@dataclass
class CallDelta:
    """One tool call's part of a delta: the first carries id and name, later ones fragments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class Delta:
    """What one step of a stream adds: reasoning text, content text, tool-call parts."""

    reasoning: str = ""
    content: str = ""
    calls: list[CallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content or self.calls)

    def add_chunks(self, chunks: Iterable[dict[str, Any]]) -> Delta:
        """Merge `chat.completion.chunk` deltas into this one (a call's parts into one)."""
        return self.add_deltas(chunk["choices"][0]["delta"] for chunk in chunks)

    def add_deltas(self, deltas: Iterable[dict[str, Any]]) -> Delta:
        """Merge Chat Completions deltas into this one (a call's parts into one)."""
        for delta in deltas:
            self.content += delta.get("content") or ""
            for key in REASONING_KEYS:
                self.reasoning += delta.get(key) or ""
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                part = next((c for c in self.calls if c.index == call["index"]), None)
                if part is None:
                    part = CallDelta(call["index"])
                    self.calls.append(part)
                part.id = part.id or call.get("id")
                part.name = part.name or function.get("name")
                part.arguments += function.get("arguments") or ""
        return self


def tool_dicts(tools: Iterable[Any] | None) -> list[dict[str, Any]] | None:
    """Engine tool objects (pydantic models or dicts) as OpenAI tool dicts, for `tools=`.

    A parser reads a tool's function name and parameters only, so an engine's tool whose
    `function` has a str `name` and dict (or no) `parameters` gives just those: dumping
    the whole model costs more than parsing a short output.
    """
    if not tools:
        return None
    result = []
    for tool in tools:
        function = getattr(tool, "function", None)
        name = getattr(function, "name", None)
        parameters = getattr(function, "parameters", None)
        if isinstance(name, str) and (parameters is None or isinstance(parameters, dict)):
            body = (
                {"name": name} if parameters is None else {"name": name, "parameters": parameters}
            )
            result.append({"type": "function", "function": body})
            continue
        if hasattr(tool, "model_dump"):
            tool = tool.model_dump(exclude_none=True)
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            result.append(tool)
    return result or None


class ResponseStream:
    """The tool half: one response's text in, `Delta`s out.

    `prefix` is the text the model continued ("" when the engine does not say); the
    template's thinking field, if the text has one, comes out as reasoning. `call_id` gives
    each call its id once, so a call's id is stable across its deltas and the final message.
    `whole=True` (the engines' one-shot paths) sends each call whole at its close, so a call
    that fails is only content; streamed, a call's first fragments may already be out when
    it fails, and the client keeps them (integrations.openai's rule), with the raw text as content.
    """

    def __init__(
        self,
        parser: type[Any],
        prefix: str = "",
        *,
        tools: Iterable[Any] | None = None,
        call_id: Callable[[int], str] = random_call_id,
        whole: bool = False,
    ) -> None:
        ids: dict[int, str] = {}

        def stable_id(index: int) -> str:
            if index not in ids:
                ids[index] = call_id(index)
            return ids[index]

        instance = parser(prefix, tools=tool_dicts(tools), on_error=ON_ERROR)
        self.stream = CompletionStream(
            instance,
            call_id=stable_id,
            tool_args="whole" if whole else "fragments",
            completion_id=UNUSED_ID,  # no chunk leaves: the envelope is not worth making
            created=0,
        )
        self.pending = Delta().add_chunks(self.stream.initial)
        self.finished = False

    def feed(self, text: str) -> Delta:
        """What `text` adds: `CompletionStream.feed`'s deltas, without building its chunks."""
        delta, self.pending = self.pending, Delta()
        stream = self.stream
        events = stream.parser.feed(text)
        return delta.add_deltas(stream.adapter.deltas(events, region=stream.open_call))

    def finish(self, finish_reason: str | None = None) -> Delta:
        """Finalize once: text held back for a delimiter, and calls cut off at the end
        (with finish_reason "length", a call still open goes into content)."""
        delta, self.pending = self.pending, Delta()
        if self.finished:
            return delta
        self.finished = True
        return delta.add_chunks(self.stream.finish(finish_reason))

    @property
    def message(self) -> dict[str, Any] | None:
        """The parsed message, after `finish`."""
        return self.stream.message

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The parse failures recovered from (empty with a integrations.openai that keeps none)."""
        return list(getattr(self.stream, "errors", ()))


def parse_whole(
    parser: type[Any],
    text: str,
    *,
    tools: Iterable[Any] | None = None,
    call_id: Callable[[int], str] = random_call_id,
) -> Delta:
    """The tool half in one shot: what `ResponseStream(parser, tools=tools, call_id=call_id,
    whole=True)` fed `text` and finished gives, as one Delta (each call whole, in order).

    A stream whose calls are sent whole merges to its message's `to_chat_message`
    (integrations.openai), so the message is converted directly, without a chunk per event,
    which costs several times the parse. Except where the two differ by design: a field
    without `repeats` whose region closed twice (the stream sent each region, the message
    keeps the last), or a string default of content or thinking (never streamed); those
    outputs go through the stream itself.
    """
    shape = shape_of(parser)
    if not shape.text_defaults:
        instance = parser("", tools=tool_dicts(tools), on_error=ON_ERROR)
        message, events = instance.finalize(text)  # one scan, as the end of the output
        if not (shape.single and _closed_twice(shape.single, events)):
            chat = to_chat_message(message, call_id=call_id)
            calls = [
                CallDelta(
                    index, call["id"], call["function"]["name"], call["function"]["arguments"]
                )
                for index, call in enumerate(chat.get("tool_calls") or ())
            ]
            return Delta(chat.get("reasoning") or "", chat["content"] or "", calls)
    stream = ResponseStream(parser, tools=tools, call_id=call_id, whole=True)
    delta = stream.feed(text)
    last = stream.finish()
    delta.reasoning += last.reasoning
    delta.content += last.content
    for part in last.calls:
        same = [call for call in delta.calls if call.index == part.index]
        if same:
            same[0].arguments += part.arguments
            same[0].name = same[0].name or part.name
            same[0].id = same[0].id or part.id
        else:
            delta.calls.append(part)
    return delta


def _closed_twice(single: frozenset[str], *event_lists: list[dict[str, Any]]) -> bool:
    """Whether a field of `single` closed more than once in these events."""
    closed: set[Any] = set()
    for events in event_lists:
        for event in events:
            if event["type"] == "region_close":
                name = event.get("field")
                if name in single:
                    if name in closed:
                        return True
                    closed.add(name)
    return False


def _alternatives(spec: dict[str, Any], kind: str) -> regex.Pattern[str] | None:
    """The regex of a field's `open` or `close` delimiter (literal(s) or pattern)."""
    pattern = spec.get(f"{kind}_pattern")
    if isinstance(pattern, str):
        return regex.compile(pattern, regex.DOTALL)
    literals = _literals(spec.get(kind))
    if not literals:
        return None
    return regex.compile("|".join(regex.escape(text) for text in literals))


def _literals(value: Any) -> tuple[str, ...]:
    """A delimiter's literal(s), in the template's order."""
    literals = [value] if isinstance(value, str) else list(value or ())
    return tuple(text for text in literals if isinstance(text, str) and text)


def _leftmost_end(text: str, literals: tuple[str, ...], start: int) -> int:
    """Where the leftmost match of the alternation of `literals` in `text` from `start` on
    ends (the first of them that occurs there, as the regex tries them), or -1. A memchr
    for each one's first character, where the regex checks every place (whether the
    thinking opens again in 13K characters of reasoning: 7.0 -> 1.7 us)."""
    best, end = len(text) + 1, -1
    for literal in literals:
        found = find_literal(text, literal, start, min(len(text), best + len(literal) - 1))
        if found != -1 and found < best:
            best, end = found, found + len(literal)
    return end


class ReasoningStream:
    """The reasoning half: thinking as reasoning deltas, then the raw text after it.

    Fed the whole output; `ended` turns true once the thinking region has closed, or a
    region other than thinking has opened (an output without thinking). From then on
    `feed` returns the output's raw text after the thinking region as content, delimiters
    of later regions included, for the tool half to parse (with no prompt). When the prompt
    itself left a region other than thinking open, the text handed on starts with that
    region's open delimiter as the prompt has it, which opens it again for the tool half.
    """

    # A text longer than this is fed to the parser in pieces, and once the thinking has
    # ended the rest is handed on unparsed (see `feed`).
    PIECE = 32

    def __init__(self, parser: type[Any], prefix: str = "") -> None:
        shape = shape_of(parser)
        self.template = shape.template
        self.parser = parser(prefix, on_error=ON_ERROR)
        # Only its reasoning is used: tool calls need no fragments (no plan to work out).
        self.adapter = ChunkAdapter(
            self.template, tool_args="whole", completion_id=UNUSED_ID, created=0
        )
        self.open = shape.open
        self.close = shape.close
        self.open_texts = shape.open_texts
        self.text = ""  # the output so far
        self.ended = False
        self.sent = 0  # how much of the text after thinking was handed on
        self.start: int | None = None  # where that text starts, found once thinking ended
        self.finished = False
        self.saw_thinking = False  # a thinking region opened (in the prompt or the output)
        self.thought = ""  # the raw text of the output's thinking region, as the parser cut it
        self.lead = ""  # prompt text handed on before the output (see the class doc)
        self.held = self.parser.held_back  # the prompt's tail, which may begin `thought`
        still_open = self._scan_prompt(self.parser.initial_events)
        if not shape.has_thinking:
            self.ended = True  # no thinking to wait for: all of the output is the rest
        elif still_open is not None:
            self.ended = True
            self.lead = self._reopener(prefix, still_open)
        self.prompt_opened = self.saw_thinking  # the prompt left the thinking open
        self.adapter.convert(self.parser.initial_events)

    def _scan_prompt(self, events: list[dict[str, Any]]) -> str | None:
        """Whether the prompt left the thinking open (`saw_thinking`: thinking the prompt
        opened and closed is no thinking of the output); return the region other than
        thinking that it left open."""
        other_open: str | None = None
        for event in events:
            field_name, kind = event.get("field"), event.get("type")
            if field_name == THINKING:
                if kind == "region_open":
                    self.saw_thinking = True
                elif kind == "region_close":
                    self.saw_thinking = False
            elif kind == "region_open":
                other_open = field_name if isinstance(field_name, str) else None
            elif kind == "region_close":
                other_open = None
        return other_open

    def _take(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The output's events that are the reasoning half's: those up to the one that ends
        the thinking (its region closes, or another region opens), tracking that end and
        the thinking's raw text on the way.

        The parser's later events are of text handed on, which the tool half parses. A text
        that runs on past the thinking's end into a thinking region again (interleaved
        thinking, in one chunk or one shot) must not add that region to the reasoning, nor
        to the raw text `after_thinking` looks for in the output: that text would not be
        found there, and the rest, the answer included, would not be handed on.
        """
        for event in events:
            field_name, kind = event.get("field"), event.get("type")
            if field_name == THINKING:
                if kind == "region_open":
                    self.saw_thinking = True
                elif kind == "region_chunk":
                    self.thought = _grown(self, "thought", event["text"])
                elif kind == "region_close":
                    break
            elif kind == "region_open":
                break
        else:
            return events
        self.ended = True
        # Its first occurrence: an equal event before it would have ended the loop there.
        return events[: events.index(event) + 1]

    def _reopener(self, prefix: str, field_name: str) -> str:
        """The prompt from the last open delimiter of `field_name` on ("" for a region that
        opens without one, which the tool half opens by itself)."""
        spec = self.template.get("fields", {}).get(field_name) or {}
        opener = _alternatives(spec, "open")
        starts = [match.start() for match in opener.finditer(prefix)] if opener else []
        return prefix[starts[-1] :] if starts else ""

    def feed(self, text: str) -> Delta:
        """The reasoning `text` completes, and the text after the thinking it hands on.

        A long first text (a one-shot output) is fed in pieces (up to just past each match of
        the thinking's close delimiter, or its start if there is none), the last piece
        being all that follows once the thinking has ended: that is handed on as it is,
        not parsed twice (here and in the tool half). The result is what feeding those
        pieces one by one gives, which is what feeding `text` gives (any chunking of the
        output hands on the same: tests/test_serving.py) as long as the thinking cannot
        open again after it ended: so only when the output has at most one match of the
        thinking's open delimiter, and none if the prompt opened the thinking. A later text
        is fed as it is: telling whether the thinking may open again searches the whole
        output, which for each delta of a stream would cost quadratic time (40-character
        deltas of a 540K-character reasoning took 157 us each, of a 135K one 47 us).
        """
        if self.ended or self.text or len(text) <= self.PIECE or self._may_reopen(text):
            return self._feed(text)
        delta = Delta()
        start = 0
        further: int | None = None  # where the next piece ends, if the last one did not settle
        while start < len(text):
            if self.ended or self.close is None:
                stop = len(text)
            elif further is not None:  # the close needs more text after it to be told
                stop, further = further, None
            else:  # on to just past the next match of the thinking's close delimiter
                found = self.close.search(text, start)
                if found is not None:
                    # One character after the match settles a close that could grow
                    # (`</think>\s*`), before the parser scans the text after it (hermes,
                    # 135 characters: 59 -> 50 us); one needing more (a look-ahead) gets
                    # PIECE characters in the next piece.
                    stop, further = found.end() + 1, found.end() + self.PIECE
                else:  # an output that starts with another region ends it in its start
                    stop = self.PIECE if start == 0 else len(text)
            step = self._feed(text[start:stop])
            delta.reasoning += step.reasoning
            delta.content += step.content
            start = stop
        return delta

    def _may_reopen(self, text: str) -> bool:
        """Whether the thinking may open in the output after it ended (repeated thinking,
        a known limit where the stream and one shot differ: the one shot stays as it is)."""
        if self.open is None:
            return True  # a thinking region with no open delimiter: no telling
        output = self.text + text
        texts = self.open_texts
        if texts:
            end = _leftmost_end(output, texts, 0)
            if end == -1:
                return False
            return self.prompt_opened or _leftmost_end(output, texts, end) != -1
        first = self.open.search(output)
        if first is None:
            return False
        return self.prompt_opened or self.open.search(output, first.end()) is not None

    def _feed(self, text: str) -> Delta:
        self.text = _grown(self, "text", text)
        if self.ended:
            return self._rest()
        delta = self._reasoning(self._take(self.parser.feed(text)))
        if self.ended:
            delta.content = self._rest().content
        return delta

    def finish(self) -> Delta:
        """At the end of the output: the thinking still held, or the rest not yet handed on."""
        if self.finished:
            return Delta()
        self.finished = True
        if self.ended:
            return self._rest()
        _, events = self.parser.finalize()
        delta = self._reasoning(self._take(events))
        delta.content = self._rest().content
        return delta

    def _reasoning(self, events: list[dict[str, Any]]) -> Delta:
        key = self.adapter.keys[THINKING]
        return Delta(
            reasoning="".join(delta.get(key) or "" for delta in self.adapter.deltas(events))
        )

    def _rest(self) -> Delta:
        if self.start is None:
            self.start = self.after_thinking()
        rest = self.text[self.start + self.sent :]
        self.sent += len(rest)
        lead, self.lead = self.lead, ""
        return Delta(content=lead + rest)

    def after_thinking(self) -> int:
        """Where the raw text after the thinking region starts in the output.

        Without a thinking region, at 0. With one, where its close delimiter ends. The
        parser scanned the output after the prompt's tail it held back (`held`: after ernie's
        thinking prompt, `<think>` and a newline, the newline; a thinking opener still open
        to a longer match, glm47's `<think>`), so the region is looked for in the two
        together: its raw text (the parser's chunks) starts at 0 when the prompt opened it
        (the region `_take` followed is the prompt's, even where the output opens the
        thinking again once it has closed), else after the first open delimiter if that
        text is there (at 0 for a region opened without one). The close delimiter is matched
        right after that text (nothing matches there when it began in the prompt: then the
        rest starts where the thinking ended).
        """
        if not self.saw_thinking:
            return 0
        held, thought = self.held, self.thought
        seen = held + self.text if held else self.text  # (one copy, once per response)
        begin = 0
        opened = None
        if not self.prompt_opened and self.open is not None:
            opened = self.open.search(seen)
        if opened is not None and seen.startswith(thought, opened.end()):
            begin = opened.end()
        elif not seen.startswith(thought):
            return len(self.text)  # not found as the parser cut it: hand nothing on twice
        end = begin + len(thought)
        closed = self.close.match(seen, end) if self.close is not None else None
        if closed is not None:
            end = closed.end()
        elif not self.ended:
            return len(self.text)
        return max(0, end - len(held))


def _grown(stream: ReasoningStream, name: str, more: str) -> str:
    """The stream's str attribute `name` with `more` after it, taken from the stream first:
    with no other reference to it, CPython grows the string in place (amortised
    O(len(more))) instead of copying it, so a long reasoning costs linear time, not
    quadratic (with `self.text += more`, and the OpenAI stream keeping the text it sent, a
    chunk of a 540K-character reasoning cost 85 us, one of a 13K one 4 us)."""
    text = getattr(stream, name)
    setattr(stream, name, "")
    text += more
    return text


def record_call(streamed: list[str], previous: list[dict[str, Any]], call: CallDelta) -> None:
    """Keep an engine tool parser's bookkeeping of the calls it sent: `streamed[index]`,
    and `previous[index]["arguments"]`, are the arguments sent so far, `["name"]` the name.

    The arguments grow in place (their two references dropped first), so a call whose
    arguments stream in many fragments (a whole file) costs linear time, not quadratic.
    """
    while len(streamed) <= call.index:
        streamed.append("")
        previous.append({"name": None, "arguments": ""})
    entry = previous[call.index]
    text = streamed[call.index]
    streamed[call.index] = entry["arguments"] = ""
    text += call.arguments
    streamed[call.index] = entry["arguments"] = text
    entry["name"] = entry["name"] or call.name


def split_reasoning(parser: type[Any], output: str, prefix: str = "") -> tuple[str | None, str]:
    """One shot: the thinking of an output (None without one) and the raw text after it."""
    stream = ReasoningStream(parser, prefix)
    first, last = stream.feed(output), stream.finish()
    reasoning = first.reasoning + last.reasoning
    return (reasoning if stream.saw_thinking else None), first.content + last.content

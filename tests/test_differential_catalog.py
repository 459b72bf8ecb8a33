"""Every catalog model, against transformers 5.23.0, over generated outputs and chunkings."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from catalog_samples import REGEX_SAMPLES, TOOLS, template_literals
from differential import check, followed_holds, shrunk_thresholds
from fixtures import final_outcome, load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings, outputs_for, prefixes
from transformers.utils.chat_parsing import ResponseParser

from compiler.catalog import entry_names, load_entry
from compiler.spec import uses_extensions

V1 = [
    name
    for name in entry_names()
    if not uses_extensions(load_entry(name).data["response_template"])
]
EXTENDED = [name for name in entry_names() if name not in V1]


@pytest.mark.parametrize("name", V1)
@given(data=st.data())
def test_catalog_parser_matches_reference(name: str, data: Any) -> None:
    entry = load_entry(name)
    template = entry.data["response_template"]
    parser = importlib.import_module(f"generated.{name}").Parser
    literals = template_literals(template)
    samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
    output = data.draw(outputs_for(literals, samples, max_size=20), label="output")
    prompts = sorted(entry.generation_prompt.values())
    prefix = data.draw(
        st.one_of(
            st.just(""),
            st.sampled_from(prompts),
            st.sampled_from(prompts).flatmap(
                lambda p: outputs_for(literals, samples, 4).map(lambda t: p + t)
            ),
            prefixes(template, outputs_for(literals, samples, 3)),
        ),
        label="prefix",
    )
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    chunks = data.draw(chunkings(output), label="chunks")
    check(template, parser, prefix, chunks, tools)


@pytest.mark.parametrize("name", V1)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_shrunk_thresholds_change_no_event(name: str, data: Any) -> None:
    """As above, with the internal thresholds shrunk (differential.shrunk_thresholds), so
    that waiting on holds, block compaction and literal probing run on short texts, and
    errors are caught mid-stream after them (the trace goes on feeding)."""
    template = load_entry(name).data["response_template"]
    parser = importlib.import_module(f"generated.{name}").Parser
    samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
    output = data.draw(
        outputs_for(template_literals(template), samples, max_size=20), label="output"
    )
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    with shrunk_thresholds(parser):
        check(template, parser, "", data.draw(chunkings(output), label="chunks"), tools)


@pytest.mark.parametrize("name", V1)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_followed_holds_change_no_event(name: str, data: Any) -> None:
    """As above, with every hold a pattern's automaton can follow followed from its second
    chunk on (differential.followed_holds: no pattern keeps a short span), in chunkings of
    up to four characters, where holds last several chunks (runtime.held_match)."""
    template = load_entry(name).data["response_template"]
    parser = importlib.import_module(f"generated.{name}").Parser
    samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
    output = data.draw(
        outputs_for(template_literals(template), samples, max_size=20), label="output"
    )
    size = data.draw(st.integers(1, 4), label="size")
    chunks = [output[i : i + size] for i in range(0, len(output), size)]
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    with followed_holds(parser):
        check(template, parser, "", chunks, tools)


def test_the_catalog_has_extension_entries() -> None:
    assert EXTENDED, "no catalog entry uses an extension, so nothing below runs"


# The keys of a field that say where its regions are, all v1.
DELIMITER_KEYS = ("open", "close", "open_pattern", "close_pattern", "repeats")


def delimiters_of(template: dict[str, Any]) -> dict[str, Any]:
    """A v1 template with `template`'s delimiters alone (text content, no extension), which
    the reference loads: where it puts regions is where an extension template's are."""
    fields = {}
    for field_name, spec in template["fields"].items():
        field = {key: spec[key] for key in DELIMITER_KEYS if key in spec}
        field["content"] = "text"
        field["transform"] = "{content}"  # (the reference wants one where a pattern captures)
        fields[field_name] = field
    shadow = {"fields": fields}
    if "start_anchor" in template:
        shadow["start_anchor"] = template["start_anchor"]
    return shadow


def reference_regions(template: dict[str, Any], prefix: str, chunks: list[str]) -> Any:
    """The regions the reference cuts the output into, fed `chunks`: (field, text) each."""
    try:
        parser = ResponseParser(template, prefix=prefix)
        events = list(parser.initial_events)
        for chunk in chunks:
            events += parser.feed(chunk)
        events += parser.finalize()[1]
    except Exception as error:  # the class is the observation
        return type(error)
    return regions_of(events)


def regions_of(events: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    """The regions of a stream's events, in order: (field, text) each."""
    regions: list[tuple[Any, str]] = []
    for event in events:
        if event["type"] == "region_open":
            regions.append((event["field"], ""))
        elif event["type"] == "region_chunk":
            regions[-1] = (event["field"], regions[-1][1] + event["text"])
    return regions


def test_delimiters_of_every_extension_entry_load_in_the_reference() -> None:
    for name in EXTENDED:
        template = load_entry(name).data["response_template"]
        ResponseParser(delimiters_of(template), prefix="")


@pytest.mark.parametrize("name", EXTENDED)
@given(data=st.data())
def test_extension_entries_parse_the_same_under_any_chunking(name: str, data: Any) -> None:
    """No reference loads extension templates: every chunking must give the message (or the
    exception class) that one-shot parsing gives, unless the reference itself puts the
    regions elsewhere when the output comes cut so (docs/design.md, Traps: a complete match
    that its partial search returns before an earlier partial one; llama3_json's `{` of an
    unclosed call, then a whole `<|python_tag|>{...}` in the same chunk)."""
    entry = load_entry(name)
    template = entry.data["response_template"]
    parser = importlib.import_module(f"generated.{name}").Parser
    samples = load_fixtures(name)["samples"] + [
        case["output"] for case in load_fixtures(name)["cases"]
    ]
    output = data.draw(
        outputs_for(template_literals(template), samples, max_size=12), label="output"
    )
    prefix = data.draw(
        st.sampled_from(["", *sorted(entry.generation_prompt.values())]), label="prefix"
    )
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    chunks = data.draw(chunkings(output), label="chunks")
    streamed = final_outcome(parser, prefix, chunks, tools)
    whole = final_outcome(parser, prefix, [output], tools)
    if streamed != whole:
        # Then each cut's regions must be the reference's, which differ between the cuts.
        delimiters = delimiters_of(template)
        cut, uncut = (
            reference_regions(delimiters, prefix, pieces) for pieces in (chunks, [output])
        )
        assert cut != uncut, (streamed, whole)
        assert (our_regions(parser, prefix, chunks), our_regions(parser, prefix, [output])) == (
            cut,
            uncut,
        )


def our_regions(parser: Any, prefix: str, chunks: list[str]) -> list[tuple[Any, str]]:
    """The regions a compiled parser cuts the output into (keeping going where a region's
    content fails to parse: where the regions are is what is compared)."""
    ours = parser(prefix, on_error="keep_raw")
    events = list(ours.initial_events)
    events += [event for chunk in chunks for event in ours.feed(chunk)]
    return regions_of(events + ours.finalize()[1])


def test_llama3_json_puts_regions_where_the_reference_does_when_a_cut_moves_them() -> None:
    """An unclosed call, then a whole `<|python_tag|>{...}`: cut after the second, the open's
    partial search returns that complete match before the unclosed one, which streamed
    stays content; whole, the first object runs on to a `}` much later, through quotes and
    braces in strings (found by the deep profile). The reference, given the same
    delimiters, does both; so do we."""
    first = '<|python_tag|>{"name": "get_time", "parameters": {}}; {"name": "get_weather", '
    first += '"parameters": {"city": "Ber<|python_tag|>{"name": "get_time"}'
    output = first + (
        '<|eom_id|>{"name": "search", "parameters": {"q": "a } b { \\"c\\" <|python_tag|>", '
        '"filter": {"x": [1, {"y": "}"}], "z": null}}}<|eot_id|>'
    )
    template = load_entry("llama3_json").data["response_template"]
    delimiters = delimiters_of(template)
    parser = importlib.import_module("generated.llama3_json").Parser
    cut = [first, output[len(first) :]]
    for chunks in (cut, [output]):  # (whole, the long first call does not parse)
        assert our_regions(parser, "", chunks) == reference_regions(delimiters, "", chunks)
    assert reference_regions(delimiters, "", cut) != reference_regions(delimiters, "", [output])

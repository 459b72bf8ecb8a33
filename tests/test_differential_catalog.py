"""Every catalog model, against transformers 5.23.0, over generated outputs and chunkings."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from catalog_samples import REGEX_SAMPLES, TOOLS, template_literals
from differential import check, shrunk_thresholds
from fixtures import final_outcome, load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings, outputs_for, prefixes

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


def test_the_catalog_has_extension_entries() -> None:
    assert EXTENDED, "no catalog entry uses an extension, so nothing below runs"


@pytest.mark.parametrize("name", EXTENDED)
@given(data=st.data())
def test_extension_entries_parse_the_same_under_any_chunking(name: str, data: Any) -> None:
    """No reference loads extension templates: every chunking must give the message (or the
    exception class) that one-shot parsing gives."""
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
    assert final_outcome(
        parser, prefix, data.draw(chunkings(output), label="chunks"), tools
    ) == final_outcome(parser, prefix, [output], tools)

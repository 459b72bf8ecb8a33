"""JIT-compiled parsers of generated templates, against transformers 5.23.0."""

from __future__ import annotations

from typing import Any

import pytest
from differential import check, shrunk_thresholds
from hypothesis import given
from hypothesis import strategies as st
from strategies import chunkings, outputs_for, prefixes, templates
from transformers.utils.chat_parsing.response_templates import load_response_template

from compiler import load_parser
from compiler.errors import TemplateError


@given(data=st.data())
def test_generated_template_matches_reference(data: Any) -> None:
    template, literals, samples = data.draw(templates(), label="template")
    try:
        load_response_template(template)
    except (ValueError, TypeError) as error:
        with pytest.raises(type(error)):
            load_parser(template)
        with pytest.raises(TemplateError):
            load_parser(template)
        return
    parser = load_parser(template)
    for round_ in range(3):
        output = data.draw(outputs_for(literals, samples), label=f"output{round_}")
        prefix = data.draw(
            st.one_of(st.just(""), prefixes(template, outputs_for(literals, samples, 3))),
            label="prefix",
        )
        chunks = data.draw(chunkings(output), label="chunks")
        check(template, parser, prefix, chunks)


@given(data=st.data())
def test_shrunk_thresholds_change_no_event(data: Any) -> None:
    """Parsers stop rescanning a held match that only a known text can change
    (CompiledParser._wait), join a region's chunks into blocks, and probe literal
    candidates before a full search. With every threshold tiny (waiting on every hold,
    however short), they must give the reference's events exactly."""
    template, literals, samples = data.draw(templates(), label="template")
    try:
        load_response_template(template)
    except (ValueError, TypeError):
        return
    parser = load_parser(template)
    output = data.draw(
        outputs_for(literals, [*samples, "<m>abc", "zz q", "<a>" + "x" * 20], 20), label="output"
    )
    with shrunk_thresholds(parser):
        check(template, parser, "", data.draw(chunkings(output), label="chunks"))

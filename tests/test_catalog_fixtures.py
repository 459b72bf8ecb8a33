"""Each catalog entry parses its fixtures to the expected message, under every chunking."""

from __future__ import annotations

import builtins
import contextlib
import importlib
from typing import Any

import pytest
from differential import check
from fixtures import (
    COVERAGE,
    case_on_error,
    comparable,
    final_outcome,
    fixture_chunkings,
    load_fixtures,
    required_coverage,
)

from compiler.catalog import entry_names, load_entry
from compiler.spec import uses_extensions

MIN_CASES = 10
CASES = [(name, case) for name in entry_names() for case in load_fixtures(name)["cases"]]


@pytest.mark.parametrize("name", entry_names())
def test_entry_has_enough_fixtures(name: str) -> None:
    cases = load_fixtures(name)["cases"]
    assert (
        len(cases) >= MIN_CASES
    ), f"{name}: {len(cases)} fixture cases, at least {MIN_CASES} required"
    covered = {tag for case in cases for tag in case.get("covers", [])}
    assert covered <= set(COVERAGE), f"{name}: unknown coverage tags {covered - set(COVERAGE)}"
    missing = required_coverage(load_entry(name).data["response_template"]) - covered
    assert not missing, f"{name}: no fixture covers {sorted(missing)}"


@pytest.mark.parametrize(
    "name, case", CASES, ids=[f"{name}-{case['name']}" for name, case in CASES]
)
def test_fixture(name: str, case: dict[str, Any]) -> None:
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    template = load_entry(name).data["response_template"]
    on_error = case_on_error(case)
    # Only plain v1 templates load in the reference, which has the strict policy only.
    v1 = not uses_extensions(template) and on_error == "raise"
    for chunks in fixture_chunkings(case["output"], f"{name}/{case['name']}"):
        kind, result = final_outcome(
            parser_cls, case["prefix"], chunks, case.get("tools"), on_error
        )
        if "error" in case:  # a subclass is fine: ours name the field and offset
            expected_class = getattr(builtins, case["error"])
            assert kind == "error" and issubclass(
                result, expected_class
            ), f"chunks={chunks!r}: {result!r}"
        else:
            assert (kind, comparable(result)) == (
                "message",
                case["expected"],
            ), f"chunks={chunks!r}"
        if v1:
            check(template, parser_cls, case["prefix"], chunks, case.get("tools"))
    if "parse_errors" in case.get("expected", {}):  # recovered: strict must have failed
        kind, result = final_outcome(
            parser_cls, case["prefix"], [case["output"]], case.get("tools")
        )
        assert kind == "error", f"strict parsing succeeded, so nothing was recovered: {result!r}"


# CPython 3.11 keeps an instance's attributes in a dict whose keys its class shares only up
# to this many attributes; with one more, every instance gets a dict of its own, and each
# attribute read on a parser's per-chunk fast path slows down (prose streaming measured 7 to
# 10% slower at 30 attributes; `sys.getsizeof(vars(parser))` goes from 296 to 1584 bytes).
SHARED_ATTRIBUTES = 29


@pytest.mark.parametrize("name", entry_names())
def test_parsers_keep_few_enough_attributes_to_share_their_keys(name: str) -> None:
    """A parser, after every fixture streamed a character at a time under each error
    policy (the paths that set the most attributes), has at most SHARED_ATTRIBUTES."""
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    most = 0
    for case in load_fixtures(name)["cases"]:
        for on_error in ("raise", "content", "keep_raw"):
            parser = parser_cls(case["prefix"], tools=case.get("tools"), on_error=on_error)
            # A fixture that fails: the attributes set up to the failure are what counts.
            with contextlib.suppress(Exception):
                for chunk in case["output"]:
                    parser.feed(chunk)
                parser.finalize()
            most = max(most, len(vars(parser)))
    assert 0 < most <= SHARED_ATTRIBUTES, f"{name}: a parser with {most} attributes"

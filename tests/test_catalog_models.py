"""Model ids: each Hugging Face id belongs to one catalog entry, and for_model finds it."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import templates_catalog
from compiler import catalog_index
from compiler.catalog import load_entry
from compiler.errors import TemplateError
from templates_catalog import (
    AmbiguousModelError,
    ModelLookupError,
    UnknownModelError,
    for_model,
    resolve,
)

ENTRIES = {name: templates_catalog.load(name) for name in templates_catalog.names()}
LISTED = sorted((model, name) for name, entry in ENTRIES.items() for model in entry["models"])


def test_each_model_id_belongs_to_exactly_one_entry() -> None:
    owners: dict[str, set[str]] = defaultdict(set)
    for model, name in LISTED:
        owners[model.casefold()].add(name)
    shared = {model: sorted(names) for model, names in owners.items() if len(names) > 1}
    assert not shared, f"model ids listed by several entries: {shared}"
    assert len(LISTED) == len(owners), "an entry lists the same model id twice"


@pytest.mark.parametrize("model, name", LISTED, ids=[model for model, _ in LISTED])
def test_every_listed_id_resolves_to_its_entry(model: str, name: str) -> None:
    assert for_model(model) == name
    assert for_model(model.upper()) == name  # ids are case-insensitive on the hub
    assert for_model(f"  {model.lower()} ") == name


def test_patterns_never_claim_another_entrys_listed_ids() -> None:
    """A pattern that matched an id another entry lists would be shadowed by the exact match
    today and silently wrong for that id's variants: patterns stay inside their family."""
    for name, entry in ENTRIES.items():
        for pattern in entry.get("model_patterns", []):
            for model, owner in LISTED:
                if owner != name:
                    assert not re.fullmatch(
                        pattern, model, re.IGNORECASE
                    ), f"{name}: pattern {pattern!r} matches {model!r}, listed by {owner}"


@pytest.mark.parametrize(
    "model, name",
    [
        ("Qwen/Qwen3-32B-AWQ", "hermes"),
        ("Qwen/Qwen3-8B-FP8", "hermes"),
        ("unsloth/Qwen3-14B-GGUF", "hermes"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "hermes"),
        ("qwen/qwen3-235b-a22b-thinking-2507-fp8", "hermes"),
        ("Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4", "hermes"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "qwen3_coder"),
        ("Qwen/Qwen3.5-27B", "qwen3"),
        ("Qwen/Qwen3.5-35B-A3B-FP8", "qwen3"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B-AWQ", "deepseek_r1"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus-FP8", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3-0324-AWQ", "deepseek_v3"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama3_json"),
        ("openai/gpt-oss-20b-MXFP4", "gpt_oss"),
        ("zai-org/GLM-4.5-Air-FP8", "glm45"),
        ("ibm-granite/granite-3.2-8b-instruct-GGUF", "granite"),
    ],
)
def test_patterns_resolve_variants(model: str, name: str) -> None:
    assert model.casefold() not in {listed.casefold() for listed, _ in LISTED}
    assert for_model(model) == name


@pytest.mark.parametrize(
    "model",
    [
        "Qwen/Qwen3-Coder-Plus",
        "Qwen/Qwen3.5",
        "deepseek-ai/DeepSeek-V3.2-Exp",
        "gpt2",
        "Qwen/Qwen3",
    ],
)
def test_unknown_ids_raise_a_lookup_error_with_candidates(model: str) -> None:
    with pytest.raises(UnknownModelError) as caught:
        for_model(model)
    error = caught.value
    assert isinstance(error, LookupError) and isinstance(error, ModelLookupError)
    assert error.model_id == model
    message = str(error)
    assert "\n" not in message and repr(model) in message
    for candidate, owner in error.candidates:
        assert for_model(candidate) == owner
        assert f"{candidate} ({owner})" in message
    if not error.candidates:
        assert "known entries:" in message


def test_a_near_miss_names_the_closest_ids() -> None:
    with pytest.raises(UnknownModelError) as caught:
        for_model("Qwen/Qwen3-Coder-Plus")
    assert ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder") in caught.value.candidates


def _entry(models: list[str], patterns: list[str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"models": models}
    if patterns is not None:
        entry["model_patterns"] = patterns
    return entry


def test_ambiguous_listed_ids_raise() -> None:
    entries = {"a": _entry(["Org/Model-1"]), "b": _entry(["org/model-1"]), "c": _entry([])}
    with pytest.raises(AmbiguousModelError) as caught:
        resolve("ORG/MODEL-1", entries)
    assert caught.value.candidates == [("ORG/MODEL-1", "a"), ("ORG/MODEL-1", "b")]
    assert "a, b" in str(caught.value) and isinstance(caught.value, LookupError)


def test_ambiguous_patterns_raise_and_a_listed_id_wins_over_patterns() -> None:
    entries = {
        "a": _entry(["Org/Model-1"], [r"Org/Model-\d+"]),
        "b": _entry([], [r"org/model-[0-9]+(?:-fp8)?"]),
    }
    assert resolve("org/model-1", entries) == "a"  # listed: exact beats any pattern
    assert resolve("Org/Model-2-FP8", entries) == "b"
    with pytest.raises(AmbiguousModelError, match=r"model_patterns.*a, b"):
        resolve("Org/Model-2", entries)


def test_patterns_match_the_whole_id() -> None:
    entries = {"a": _entry([], [r"Org/Model"])}
    assert resolve("org/model", entries) == "a"
    for near in ("Org/Model-2", "X/Org/Model", "Org/Mode"):
        with pytest.raises(UnknownModelError):
            resolve(near, entries)


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_a_model_id_is_a_non_empty_string(bad: Any) -> None:
    with pytest.raises(TypeError):
        resolve(bad, ENTRIES)


@given(st.text(max_size=40))
def test_any_text_resolves_or_raises_a_lookup_error(model: str) -> None:
    try:
        name = resolve(model, ENTRIES)
    except ModelLookupError as error:
        assert "\n" not in str(error) or "\n" in model
    except TypeError:
        assert not model.strip()
    else:
        assert name in ENTRIES


@pytest.mark.parametrize(
    "patterns, where",
    [
        ("Org/.*", "model_patterns"),
        ([3], "model_patterns[0]"),
        ([""], "model_patterns[0]"),
        (["ok", "(unclosed"], "model_patterns[1]"),
    ],
)
def test_model_patterns_are_validated(tmp_path: Any, patterns: Any, where: str) -> None:
    (tmp_path / "templates_catalog").mkdir()
    entry = {
        "response_template": {"fields": {"content": {}}},
        "generation_prompt": {"default": ""},
        "models": [],
        "model_patterns": patterns,
    }
    (tmp_path / "templates_catalog" / "x.json").write_text(json.dumps(entry))
    with pytest.raises(TemplateError, match=re.escape(where)):
        load_entry("x", tmp_path)


def test_the_catalog_index_shows_the_entry_of_every_model_id() -> None:
    text = catalog_index.index()
    rows = {
        cells[1].strip(): cells[2].strip().strip("`")
        for cells in (line.split("|") for line in text.splitlines())
        if len(cells) == 4 and "/" in cells[1] and not cells[1].strip().startswith("*re*")
    }
    assert rows == {model: name for model, name in LISTED}
    for name, entry in ENTRIES.items():
        for pattern in entry.get("model_patterns", []):
            assert f"| *re* {catalog_index._code(pattern)} | `{name}` |" in text


def test_the_index_shows_a_clash_instead_of_failing(tmp_path: Any) -> None:
    (tmp_path / "templates_catalog").mkdir()
    base = load_entry("smollm3").data
    for name in ("one", "two"):
        path = tmp_path / "templates_catalog" / f"{name}.json"
        path.write_text(json.dumps({**base, "models": ["Org/Same-Model"]}), encoding="utf-8")
    assert "| Org/Same-Model | **ambiguous**: `one`, `two` |" in catalog_index.index(tmp_path)

"""The model catalog as package data: one JSON entry per model family.

`names()` lists the entries, `path(name)` is where an entry's file is (inside the installed
package, or the repository), `load(name)` reads it, and `for_model(model_id)` says which entry
parses a Hugging Face model's output. Nothing here needs the compiler: the CLI's parse commands
and the serving plugins read entries through this module.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

# Entry names are lowercase identifiers: they are also module names under generated/.
ENTRY_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _root() -> Path:
    return Path(str(resources.files(__name__)))


def names() -> list[str]:
    """Every catalog entry, sorted."""
    return sorted(path.stem for path in _root().glob("*.json") if ENTRY_NAME.fullmatch(path.stem))


def path(name: str) -> Path:
    """The file of entry `name` (which need not exist)."""
    if not ENTRY_NAME.fullmatch(name):
        raise ValueError(f"catalog entry names are lowercase identifiers, got {name!r}")
    return _root() / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    """Entry `name`, as data. Raises KeyError naming the known entries when there is none."""
    file = path(name)
    if not file.is_file():
        raise KeyError(f"no catalog entry {name!r}; known entries: {', '.join(names())}")
    data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    return data


class ModelLookupError(LookupError):
    """No single catalog entry parses this model id. `candidates` holds what comes closest:
    `(model id or pattern, entry)` pairs, best first."""

    def __init__(self, message: str, model_id: str, candidates: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.model_id = model_id
        self.candidates = candidates


class UnknownModelError(ModelLookupError):
    """No entry lists the model id and no entry's `model_patterns` matches it."""


class AmbiguousModelError(ModelLookupError):
    """Several entries claim the model id: the catalog is inconsistent for it."""


def for_model(model_id: str) -> str:
    """The name of the catalog entry for a Hugging Face model id, such as "Qwen/Qwen3-8B".

    An id that an entry lists in `models` resolves to that entry (case-insensitively); any other
    id resolves through the entries' `model_patterns` (regexes that must match the whole id,
    case-insensitively, e.g. quantized re-uploads such as "Qwen/Qwen3-32B-AWQ"). Raises
    UnknownModelError when nothing matches and AmbiguousModelError when several entries do; both
    are LookupErrors whose message names the closest candidates.
    """
    return resolve(model_id, {name: load(name) for name in names()})


def resolve(model_id: str, entries: Mapping[str, Mapping[str, Any]]) -> str:
    """`for_model` over the given entries (name -> entry data): the resolution rule, on its own."""
    if not isinstance(model_id, str) or not model_id.strip():
        raise TypeError(f"a model id is a non-empty string, got {model_id!r}")
    wanted = model_id.strip().casefold()
    listed = sorted(
        {
            name
            for name, entry in entries.items()
            for model in _models(entry)
            if model.casefold() == wanted
        }
    )
    if not listed:
        listed = sorted(
            name
            for name, entry in entries.items()
            if any(
                re.fullmatch(pattern, model_id.strip(), re.IGNORECASE)
                for pattern in _patterns(entry)
            )
        )
        how = "model_patterns"
    else:
        how = "models lists"
    if len(listed) == 1:
        return listed[0]
    if listed:
        raise AmbiguousModelError(
            f"model id {model_id!r} is claimed by the {how} of several catalog entries: "
            f"{', '.join(listed)}",
            model_id,
            [(model_id, name) for name in listed],
        )
    candidates = _closest(model_id, entries)
    hint = "; closest: " + ", ".join(f"{model} ({name})" for model, name in candidates)
    raise UnknownModelError(
        f"no catalog entry for model id {model_id!r}"
        + (hint if candidates else f"; known entries: {', '.join(sorted(entries))}"),
        model_id,
        candidates,
    )


def _models(entry: Mapping[str, Any]) -> list[str]:
    models = entry.get("models", [])
    return [model for model in models if isinstance(model, str)] if isinstance(models, list) else []


def _patterns(entry: Mapping[str, Any]) -> list[str]:
    patterns = entry.get("model_patterns", [])
    if not isinstance(patterns, list):
        return []
    return [pattern for pattern in patterns if isinstance(pattern, str)]


def _closest(
    model_id: str, entries: Mapping[str, Mapping[str, Any]], limit: int = 5
) -> list[tuple[str, str]]:
    """The listed model ids most like `model_id` (by difflib's ratio, case-insensitive)."""
    owners: dict[str, tuple[str, str]] = {}
    for name, entry in sorted(entries.items()):
        for model in _models(entry):
            owners.setdefault(model.casefold(), (model, name))
    matches = _close_matches(model_id.strip().casefold(), owners, limit)
    return [owners[match] for match in matches]


def _close_matches(word: str, possibilities: Iterable[str], limit: int) -> list[str]:
    possibilities = list(possibilities)
    matches = difflib.get_close_matches(word, possibilities, n=limit, cutoff=0.6)
    if matches:
        return matches
    # A repository name alone ("qwen3-8b" for "Qwen/Qwen3-8B") compares better without the org.
    tails = {possibility.rsplit("/", 1)[-1]: possibility for possibility in possibilities}
    hits = difflib.get_close_matches(word.rsplit("/", 1)[-1], list(tails), n=limit, cutoff=0.6)
    return [tails[hit] for hit in hits]

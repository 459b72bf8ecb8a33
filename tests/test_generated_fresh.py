"""generated/ must be exactly what a fresh build of the catalog produces; its index
(generated.MODULES, generated.ALIASES) says which module parses which template."""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import generated
from compiler import catalog
from compiler.spec import template_sha256


@pytest.fixture(autouse=True, scope="module")
def build_each_entry_once() -> Iterator[None]:
    """Each test here builds the whole catalog (45 modules, through black); a copy of the
    project builds to the same text, so each entry is built once per module, keyed by the
    bytes of its file. What is tested is how check and write compare and write files."""
    built: dict[tuple[str, bytes], str] = {}
    real = catalog.build_module

    def build_module(name: str, root: Any = None) -> str:
        path = (catalog.ROOT if root is None else root) / catalog.CATALOG / f"{name}.json"
        key = (name, path.read_bytes())
        if key not in built:
            built[key] = real(name, root)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalog, "build_module", build_module)
        yield


def test_generated_tree_is_fresh() -> None:
    assert catalog.check() == []


def _copy_project(tmp_path: Path) -> Path:
    for directory in (catalog.CATALOG, catalog.GENERATED):
        shutil.copytree(
            catalog.ROOT / directory,
            tmp_path / directory,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return tmp_path


def test_check_reports_a_hand_edited_module(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    target = root / "generated" / "smollm3.py"
    target.write_text(target.read_text().replace('"<think>"', '"<thinking>"'))
    assert catalog.check(root) == [
        "generated/smollm3.py: differs from a fresh build (run make compile-all)"
    ]


def test_check_reports_orphaned_and_missing_modules(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    (root / "generated" / "retired_model.py").write_text("# left over\n")
    (root / "generated" / "qwen3.py").unlink()
    assert catalog.check(root) == [
        "generated/qwen3.py: missing (run make compile-all)",
        "generated/retired_model.py: orphaned, no catalog entry produces it",
    ]


def test_compile_writes_only_what_changed(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    assert catalog.write(catalog.build_all(root), root) == []
    (root / "generated" / "smollm3.py").write_text("stale\n")
    assert catalog.write(catalog.build_all(root), root) == [Path("generated/smollm3.py")]
    assert catalog.check(root) == []


def test_the_index_lists_every_module_and_its_template_hash() -> None:
    hashes = {
        name: template_sha256(catalog.load_entry(name).data["response_template"])
        for name in catalog.entry_names()
    }
    assert generated.MODULES == hashes
    assert all(len(key) == 64 for key in generated.MODULES.values())  # the full hex digest


def test_identical_templates_are_one_module_and_aliases() -> None:
    # Every group of entries with one hash has exactly one compiled module, the first by name.
    groups: dict[str, list[str]] = {}
    for name, key in sorted(generated.MODULES.items()):
        groups.setdefault(key, []).append(name)
    expected = {name: names[0] for names in groups.values() for name in names[1:]}
    assert generated.ALIASES == expected
    assert {"glm47": "glm45", "step3p5": "qwen3_coder"}.items() <= expected.items()
    for alias, canonical in generated.ALIASES.items():
        assert canonical not in generated.ALIASES
        module = importlib.import_module(f"generated.{alias}")
        target = importlib.import_module(f"generated.{canonical}")
        assert module.Parser is target.Parser and module.TEMPLATE is target.TEMPLATE
        source = (catalog.ROOT / "generated" / f"{alias}.py").read_text(encoding="utf-8")
        assert f"templates_catalog/{alias}.json" in source
        assert f"templates_catalog/{canonical}.json" in source
        assert len(source.splitlines()) < 15


def test_check_reports_an_alias_compiled_in_full(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    full = (root / "generated" / "glm45.py").read_text(encoding="utf-8")
    (root / "generated" / "glm47.py").write_text(full.replace("glm45", "glm47"))
    assert catalog.check(root) == [
        "generated/glm47.py: differs from a fresh build (run make compile-all)"
    ]


def test_a_template_that_diverges_gets_its_own_module_and_index_entry(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    path = root / catalog.CATALOG / "glm47.json"
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["response_template"]["fields"]["content"] = {"content": "text"}
    path.write_text(json.dumps(entry), encoding="utf-8")
    problems = catalog.check(root)
    assert problems == [
        "generated/__init__.py: differs from a fresh build (run make compile-all)",
        "generated/glm47.py: differs from a fresh build (run make compile-all)",
    ]
    files = catalog.build_all(root)
    index = files[Path("generated/__init__.py")]
    assert '"glm47": "glm45"' not in index and '"step3p5": "qwen3_coder"' in index
    assert f'"glm47": "{template_sha256(entry["response_template"])}"' in index
    assert "class Parser(" in files[Path("generated/glm47.py")]
    assert catalog.build_module("glm47", root) == files[Path("generated/glm47.py")]


def test_compiling_one_entry_also_writes_the_index() -> None:
    """`make compile MODEL=x` writes the module and generated/__init__.py, so the index
    lists the entry's template hash (make check would call it stale otherwise)."""
    from compiler import catalog

    one = catalog.build_entry("smollm3")
    whole = catalog.build_all()
    assert set(one) == {Path("generated/__init__.py"), Path("generated/smollm3.py")}
    assert all(one[path] == whole[path] for path in one)

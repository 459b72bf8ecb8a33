"""generated/ must be exactly what a fresh build of the catalog produces."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compiler import catalog


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

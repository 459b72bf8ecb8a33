"""Corpora split among processes and machines: integrations.batch blocks, Ray Data, Dask.

Every engine must give, line for line, what `parse-jsonl` writes for the same file: bad
lines become error records, none is lost, none aborts the job. Ray and Dask run for real
(a local Ray instance, Dask's process scheduler and a dask.distributed cluster); their
tests are skipped only when the `ray` / `dask` extra is not installed.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from corpus import corpus_lines, write_corpus
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

from cli.app import main
from integrations import batch

MODEL = "smollm3"
OPTIONS: dict[str, Any] = {"tools_field": "tools", "default_prefix": "<|im_start|>assistant\n"}


def parse_jsonl_output(path: Path, tmp_path: Path) -> list[str]:
    """The result lines the CLI writes for `path`."""
    out = tmp_path / f"{path.stem}.cli.jsonl"
    args = ["parse-jsonl", "--model", MODEL, "--tools-field", "tools", "--jobs", "1"]
    assert main([*args, "--no-progress", str(path), str(out)]) == 0
    return out.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[Path, list[str]]]:
    directory = tmp_path_factory.mktemp("corpus")
    paths = write_corpus(directory)
    expected = {path: parse_jsonl_output(path, directory) for path in paths}
    errors = sum("error" in json.loads(line) for line in expected[paths[0]])
    assert errors >= 6 and len(expected[paths[0]]) == len(corpus_lines())
    return paths, expected


def by_blocks(path: Path, blocksize: int) -> list[str]:
    """parse_block over plan_blocks, numbered with count_lines: what the engines run."""
    out: list[str] = []
    first_line = 1
    for block in batch.plan_blocks(path, blocksize):
        results = batch.parse_block(block, first_line, model=MODEL, **OPTIONS)
        assert len(results) == batch.count_lines(block)
        out += [text for text, _ in results]
        first_line += len(results)
    return out


@settings(max_examples=examples(40))
@given(blocksize=st.integers(min_value=1, max_value=6000))
def test_blocks_give_the_parse_jsonl_lines_for_any_blocksize(
    blocksize: int, corpus: tuple[list[Path], dict[Path, list[str]]]
) -> None:
    paths, expected = corpus
    assert by_blocks(paths[0], blocksize) == expected[paths[0]]


def test_blocks_cut_at_line_starts(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"aaaa\nbb\n\ncccccc\nd")
    for size in range(1, 20):
        blocks = batch.plan_blocks(path, size)
        assert blocks[0].start == 0 and blocks[-1].end == path.stat().st_size
        assert all(a.end == b.start for a, b in itertools.pairwise(blocks))
        assert all(
            path.read_bytes()[block.start - 1 : block.start] == b"\n" for block in blocks[1:]
        )
        assert sum(batch.count_lines(block) for block in blocks) == 5
    (tmp_path / "empty.jsonl").write_bytes(b"")
    [empty] = batch.plan_blocks(tmp_path / "empty.jsonl", 10)
    assert batch.count_lines(empty) == 0 and batch.parse_block(empty, 1, model=MODEL) == []
    with pytest.raises(ValueError):
        batch.plan_blocks(path, 0)


def test_parse_batch_callable_class() -> None:
    records = {"output": ["Hi<|im_end|>", None], "prefix": ["", ""]}
    work = batch.ParseBatch(model=MODEL)
    assert work(records) == batch.parse_batch(records, model=MODEL, as_json=True)
    with pytest.raises(batch.UnknownModel):
        batch.ParseBatch(model="no_such_model")


# -- Ray Data ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local() -> Any:
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    pytest.importorskip("ray.data", reason="the ray extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_parse_jsonl_equals_parse_jsonl(
    ray_local: Any, corpus: tuple[list[Path], dict[Path, list[str]]]
) -> None:
    from integrations import ray as ray_integration

    paths, expected = corpus
    dataset = ray_integration.parse_jsonl(paths, model=MODEL, blocksize=700, **OPTIONS)
    rows = sorted(dataset.take_all(), key=lambda row: (row["path"], row["line"]))
    for path in paths:
        mine = [row for row in rows if row["path"] == str(path)]
        assert [row["line"] for row in mine] == list(range(1, len(expected[path]) + 1))
        assert [row["result"] for row in mine] == expected[path]
        assert [row["ok"] for row in mine] == [
            "error" not in json.loads(line) for line in expected[path]
        ]
    with pytest.raises(batch.UnknownModel):
        ray_integration.parse_jsonl(paths, model="no_such_model")


def test_ray_map_batches_with_parse_batch(ray_local: Any) -> None:
    import ray.data

    records = [{"output": f"Hi {n}<|im_end|>", "prefix": "" if n % 3 else None} for n in range(50)]
    records[7] = {"output": '<tool_call>{"name": ', "prefix": ""}  # the parser raises
    dataset = ray.data.from_items(records, override_num_blocks=4).map_batches(
        batch.ParseBatch,
        fn_constructor_kwargs={"model": MODEL, "default_prefix": ""},
        batch_size=8,
        concurrency=2,
    )
    rows = dataset.take_all()
    assert len(rows) == 50
    direct = batch.parse_records(records, model=MODEL, default_prefix="")
    got = sorted((row["output"], row["message"], row["error"]) for row in rows)
    want = sorted(
        (
            record["output"],
            batch.dumps(result["message"]) if "message" in result else None,
            batch.dumps(result["error"]) if "error" in result else None,
        )
        for record, result in zip(records, direct, strict=True)
    )
    assert got == want
    assert sum(row["error"] is not None for row in rows) == 1


# -- Dask --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_installed() -> Any:
    pytest.importorskip("dask.bag", reason="the dask extra is not installed")
    pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
    return pytest.importorskip("distributed", reason="the dask extra is not installed")


@pytest.mark.parametrize("scheduler", ["synchronous", "processes"])
def test_dask_parse_jsonl_equals_parse_jsonl(
    scheduler: str, dask_installed: Any, corpus: tuple[list[Path], dict[Path, list[str]]]
) -> None:
    import dask

    from integrations import dask as dask_integration

    paths, expected = corpus
    bag = dask_integration.parse_jsonl(paths, model=MODEL, blocksize=900, **OPTIONS)
    assert bag.npartitions > len(paths)  # the blocksize cuts each file
    with dask.config.set(scheduler=scheduler, num_workers=2):
        lines = bag.compute()
    assert lines == [line for path in paths for line in expected[path]]


def test_dask_distributed_cluster(
    dask_installed: Any, corpus: tuple[list[Path], dict[Path, list[str]]], tmp_path: Path
) -> None:
    import dask.dataframe as dd
    import pandas as pd

    from integrations import dask as dask_integration

    paths, expected = corpus
    with (
        dask_installed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        dask_installed.Client(cluster),
    ):
        bag = dask_integration.parse_jsonl(paths[0], model=MODEL, blocksize=900, **OPTIONS)
        bag.to_textfiles(str(tmp_path / "parsed-*.jsonl"))
        written = sorted(tmp_path.glob("parsed-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
        lines = [line for part in written for line in part.read_text("utf-8").splitlines()]
        assert lines == expected[paths[0]]

        records = [json.loads(line) for line in corpus_lines()[:6] if line.startswith(b'{"id"')]
        frame = pd.DataFrame(
            {
                "output": [record["output"] for record in records] + ["Bye<|im_end|>"],
                "prefix": [record["prefix"] for record in records] + [None],
            }
        )
        parsed = dask_integration.parse_frame(
            dd.from_pandas(frame, npartitions=3), model=MODEL, default_prefix=""
        ).compute()
    direct = batch.parse_batch(frame, model=MODEL, default_prefix="", as_json=True)
    assert list(parsed["message"]) == direct["message"]
    assert list(parsed["error"]) == direct["error"]
    assert list(parsed.columns) == ["output", "prefix", "message", "error"]

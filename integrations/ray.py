"""Ray Data: parse JSON-lines corpora on a Ray cluster (or one machine), lines never lost.

`pip install 'response-template-compiler[ray]'`. `parse_jsonl(paths, model=...)` returns a
Ray Dataset with one row per input line, `{"path", "line", "ok", "result"}`, where
`result` is exactly the line `parse-jsonl` writes for it (`{"line": N, "message": ...}` or
`{"line": N, "error": ...}`, as JSON text). The files are read as bytes, never with
`ray.data.read_json`, so a malformed line is an error record instead of a failed job.

Files are cut into blocks of about `blocksize` bytes at line starts
(`integrations.batch.plan_blocks`, on the driver: it reads a few bytes per cut), each
block's lines are counted by a Ray task to number them, then each block is parsed by a
task. Files must be readable at the same path from the driver and the workers (a shared
or local file system). Every node needs this package and `regex`, not the compiler.

For records already in a Dataset (`read_parquet`, ...), map `integrations.batch.ParseBatch`
with `map_batches`: it adds `message` and `error` columns (JSON text or None).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from typing import Any

from . import batch

try:
    import ray
    import ray.data
except ModuleNotFoundError as error:  # pragma: no cover - depends on the extra
    raise ModuleNotFoundError(
        "integrations.ray needs Ray Data: pip install 'response-template-compiler[ray]'",
        name=error.name,
    ) from error

__all__ = ["parse_jsonl"]


def _paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]


def _parse_item(item: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
    block = batch.Block(item["path"], item["start"], item["end"])
    results = batch.parse_block(block, item["first_line"], **options)
    return [
        {"path": block.path, "line": number, "ok": not failed, "result": text}
        for number, (text, failed) in enumerate(results, item["first_line"])
    ]


def parse_jsonl(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    model: str,
    blocksize: int = 32 << 20,
    **options: Any,
) -> ray.data.Dataset:
    """A Dataset of the results of every line of `paths`, as `parse-jsonl` gives them.

    Options are those of `parse-jsonl` / `integrations.batch.parse_json_line`:
    `output_field`, `prefix_field`, `tools_field`, `id_field`, `default_prefix` (by default,
    as for parse-jsonl, the catalog entry's generation_prompt["default"]). Rows come
    in file and line order when the context preserves order
    (`ray.data.DataContext.get_current().execution_options.preserve_order = True`);
    otherwise sort by ("path", "line") or join on them.
    """
    batch.get_parser(model)  # an unknown model fails here, not in every task
    options.setdefault("default_prefix", batch.default_prefix(model))
    blocks = [block for path in _paths(paths) for block in batch.plan_blocks(path, blocksize)]
    count = ray.remote(batch.count_lines)
    counts = ray.get([count.remote(block) for block in blocks])
    items = []
    for path, group in itertools.groupby(zip(blocks, counts, strict=True), lambda x: x[0].path):
        first_line = 1
        for block, lines in group:
            items.append({"path": path, "start": block.start, "end": block.end})
            items[-1]["first_line"] = first_line
            first_line += lines
    dataset = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    return dataset.flat_map(_parse_item, fn_kwargs={"model": model, **options})

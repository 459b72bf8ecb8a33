"""Dask: parse JSON-lines corpora with dask.bag / dask.distributed, lines never lost.

`pip install 'response-template-compiler[dask]'`. `parse_jsonl(paths, model=...)` returns a
`dask.bag.Bag` of result lines, in file and line order, each exactly the line
`parse-jsonl` writes (`{"line": N, "message": ...}` or `{"line": N, "error": ...}`, JSON
text): `bag.to_textfiles("parsed/*.jsonl")` writes them, one file per block, and
`"\\n".join(bag.compute())` is parse-jsonl's output for one input file. The files are read
as bytes, never with `dask.dataframe.read_json`, so a malformed line is an error record
instead of a failed job.

Files are cut into blocks of about `blocksize` bytes at line starts
(`integrations.batch.plan_blocks`, on the client: a few bytes read per cut); a task
counts each block's lines, so that each parse task knows the number of its first line.
Files must be readable at the same path from the client and the workers.

For records already in a Dask DataFrame, `parse_frame(ddf, model=...)` maps
`integrations.batch.ParseBatch` over its partitions, adding `message` and `error`
columns (JSON text or None). Parsing is CPU-bound Python: run it on processes
(`scheduler="processes"`) or a dask.distributed cluster, not on threads.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable
from typing import Any

from . import batch

try:
    import dask
    import dask.bag
    import pandas as pd
except ModuleNotFoundError as error:  # pragma: no cover - depends on the extra
    raise ModuleNotFoundError(
        "integrations.dask needs Dask: pip install 'response-template-compiler[dask]'",
        name=error.name,
    ) from error

__all__ = ["parse_frame", "parse_jsonl"]


def _paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]


def _texts(block: batch.Block, first_line: int, **options: Any) -> list[str]:
    return [text for text, _ in batch.parse_block(block, first_line, **options)]


def parse_jsonl(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    model: str,
    blocksize: int = 32 << 20,
    **options: Any,
) -> dask.bag.Bag:
    """A Bag of the result lines of every line of `paths`, in order, as `parse-jsonl` writes.

    Options are those of `parse-jsonl` / `integrations.batch.parse_json_line`:
    `output_field`, `prefix_field`, `tools_field`, `id_field`, `default_prefix` (by default,
    as for parse-jsonl, the catalog entry's generation_prompt["default"]).
    """
    batch.get_parser(model)  # an unknown model fails here, not in every task
    options.setdefault("default_prefix", batch.default_prefix(model))
    count = dask.delayed(batch.count_lines, pure=True)
    parse = dask.delayed(_texts, pure=True)
    add = dask.delayed(operator.add, pure=True)
    parts = []
    for path in _paths(paths):
        first_line: Any = 1
        for block in batch.plan_blocks(path, blocksize):
            parts.append(parse(block, first_line, model=model, **options))
            first_line = add(first_line, count(block))
    return dask.bag.from_delayed(parts)


def parse_frame(frame: Any, *, model: str, **options: Any) -> Any:
    """`frame` (a Dask DataFrame of records) with `message` and `error` columns added.

    Options are those of `integrations.batch.parse_batch`; a missing value (NaN, None)
    counts as an absent field, so a record without a prefix uses `default_prefix`.
    """
    work = batch.ParseBatch(model=model, **options)

    def parse_partition(part: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(work(part), index=part.index)

    meta = frame._meta.assign(message=pd.Series(dtype=object), error=pd.Series(dtype=object))
    return frame.map_partitions(parse_partition, meta=meta)

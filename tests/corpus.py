"""A small JSON-lines corpus with every kind of bad line, for the batch engines' tests."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures import load_fixtures


def corpus_lines(model: str = "smollm3") -> list[bytes]:
    """Fixture records (with ids and tools), and lines each engine must turn into errors."""
    lines: list[bytes] = []
    for index, case in enumerate(load_fixtures(model)["cases"]):
        record = {"id": index, **case}
        lines.append(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        if index == 1:
            lines.append(b'{"output": "Hi<|im_end|>", "prefix": \n')  # invalid JSON
            lines.append(b"\n")  # an empty line
            lines.append(b'{"output": "caf\xe9"}\n')  # not UTF-8
        if index == 3:
            lines.append(b"[1, 2]\r\n")  # not an object, CRLF
            lines.append(json.dumps({"id": "no-output", "text": "x"}).encode() + b"\n")
    lines.append(json.dumps({"output": "Bye.<|im_end|>"}).encode() + b"\n")  # default prefix
    lines.append(json.dumps({"id": [1, "é"], "output": "Last<|im_end|>"}).encode())  # no \n
    return lines


def write_corpus(directory: Path, copies: int = 2) -> list[Path]:
    """`copies` files of the corpus, each a little different (rotated), in `directory`."""
    lines = corpus_lines()
    paths = []
    for copy in range(copies):
        rotated = lines[copy:-1] + lines[:copy] + lines[-1:]
        path = directory / f"part-{copy}.jsonl"
        path.write_bytes(b"".join(rotated))
        paths.append(path)
    return paths

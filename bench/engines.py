"""Our engine plugins vs the engines' own parsers, on the same outputs (make test-engines).

For every catalog entry with a counterpart (tests/engine_cases.py) and every fixture case:
vLLM's own tool/reasoning pair and our `rtc-NAME` pair, each composed by vLLM's
ParserManager and driven as vLLM's serving layer drives them, one-shot (`parse`) and
streamed token by token (`parse_delta`); the same for SGLang where both sides load. Prints
one line per disagreement (the result compared: reasoning, content, tool calls by name and
parsed arguments) and a summary; "ours-stream" lines flag our own streamed result differing
from our one-shot result, which would be a bug of ours.

    .venv-engines/bin/python bench/engines.py > bench/engines.txt
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests")]
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

from engine_cases import COUNTERPARTS, cases  # noqa: E402
from engine_drivers import (  # noqa: E402
    sglang_once,
    sglang_stream,
    vllm_once,
    vllm_parser_class,
    vllm_stream,
)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    return [key for key in ("reasoning", "content", "tool_calls") if ours[key] != theirs[key]]


def main() -> None:
    logging.disable(logging.WARNING)
    import integrations.vllm  # noqa: F401  (registers rtc-NAME)

    try:
        import integrations.sglang as sglang_plugin
    except ImportError:
        sglang_plugin = None
    totals: Counter[str] = Counter()
    print("# make test-engines: our plugins vs the engines' own parsers, same outputs")
    print("# vllm==0.33.0 sglang==0.5.23; one line per disagreement:")
    print("# ENGINE ENTRY/CASE MODE: KEYS differ | ours=... | theirs=...")
    for entry, (v_tool, v_reason, s_tool, s_reason) in COUNTERPARTS.items():
        try:
            theirs_cls = vllm_parser_class(v_tool, v_reason, entry)
            ours_cls = vllm_parser_class(
                f"rtc-{entry}", f"rtc-{entry}" if v_reason else None, entry
            )
        except Exception as error:
            print(f"vllm {entry}: peer not loadable here: {type(error).__name__}: {error}"[:200])
            totals["vllm peer not loadable"] += 1
            ours_cls = theirs_cls = None
        for case in cases(entry):
            label = f"{entry}/{case.name}"
            if ours_cls is not None:
                ours_once = vllm_once(ours_cls, case)
                ours_streamed, _ = vllm_stream(ours_cls, case)
                if ours_streamed != ours_once:
                    keys = differences(ours_streamed, ours_once)
                    print(
                        f"vllm {label} ours-stream: {keys} | stream={short(ours_streamed)} | once={short(ours_once)}"
                    )
                    totals["vllm ours stream != once"] += 1
                for mode, run in (
                    ("once", vllm_once),
                    ("stream", lambda c, k: vllm_stream(c, k)[0]),
                ):
                    ours = ours_once if mode == "once" else ours_streamed
                    try:
                        theirs = run(theirs_cls, case)
                    except Exception as error:
                        print(
                            f"vllm {label} {mode}: peer raised {type(error).__name__}: {error}"[
                                :200
                            ]
                        )
                        totals["vllm peer raised"] += 1
                        continue
                    keys = differences(ours, theirs)
                    totals[f"vllm {mode} compared"] += 1
                    if keys:
                        totals[f"vllm {mode} differ"] += 1
                        print(
                            f"vllm {label} {mode}: {keys} differ | ours={short({k: ours[k] for k in keys})} | theirs={short({k: theirs[k] for k in keys})}"
                        )
            if s_tool is None and s_reason is None:
                continue
            for mode, run in (("once", sglang_once), ("stream", sglang_stream)):
                try:
                    theirs = run(s_tool, s_reason, case)
                except Exception as error:
                    print(
                        f"sglang {label} {mode}: peer raised {type(error).__name__}: {error}"[:200]
                    )
                    totals["sglang peer raised"] += 1
                    continue
                if sglang_plugin is None:
                    continue
                name = sglang_plugin.PREFIX + entry
                ours = run(name, name if s_reason else None, case)
                keys = differences(ours, theirs)
                totals[f"sglang {mode} compared"] += 1
                if keys:
                    totals[f"sglang {mode} differ"] += 1
                    print(
                        f"sglang {label} {mode}: {keys} differ | ours={short({k: ours[k] for k in keys})} | theirs={short({k: theirs[k] for k in keys})}"
                    )
    print("# totals")
    for key in sorted(totals):
        print(f"# {key}: {totals[key]}")


if __name__ == "__main__":
    main()

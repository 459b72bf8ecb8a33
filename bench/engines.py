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

import regex  # noqa: E402
from engine_cases import COUNTERPARTS, SPECIAL, cases  # noqa: E402
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


MARKUP = regex.compile(SPECIAL.pattern + r"|\s+")


def _stringly(calls: list[Any]) -> list[Any]:
    return [
        (name, {k: str(v) for k, v in args.items()} if isinstance(args, dict) else args)
        for name, args in calls
    ]


def classify(ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Why the two results differ, by the first rule that fits (see the header of the output)."""
    oc, tc = ours["content"], theirs["content"]
    if ours["tool_calls"] == theirs["tool_calls"] and ours["reasoning"] == theirs["reasoning"]:
        if MARKUP.sub("", oc) == MARKUP.sub("", tc):
            return "A markup"
        if oc.startswith(tc) or tc.startswith(oc):
            return "E text-around-calls"
    if not ours["reasoning"] and theirs["reasoning"] and oc and oc in theirs["reasoning"] + tc:
        return "B reasoning-vs-content"
    if len(ours["tool_calls"]) < len(theirs["tool_calls"]) or (
        ours["tool_calls"] != theirs["tool_calls"]
        and any("<unparsable>" in str(args) for _, args in theirs["tool_calls"])
    ):
        return (
            "C cut-off-or-unparsed-call"
            if SPECIAL.search(oc) or "{" in oc
            else "G peer-finds-more-calls"
        )
    if ours["tool_calls"] != theirs["tool_calls"] and _stringly(ours["tool_calls"]) == _stringly(
        theirs["tool_calls"]
    ):
        return "D argument-typing"
    if len(ours["tool_calls"]) > len(theirs["tool_calls"]):
        return "F peer-misses-calls"
    if ours["tool_calls"] == theirs["tool_calls"]:
        return "R thinking-split"
    if [n for n, _ in ours["tool_calls"]] == [n for n, _ in theirs["tool_calls"]]:
        return "H argument-values"
    return "Z other"


CLASSES = {
    "A markup": "format choice: our templates end content at the end-of-turn/markup token; the peer leaves it in content",
    "B reasoning-vs-content": "peer behaviour: its reasoning parser takes text without a thinking opener as reasoning; ours as content",
    "C cut-off-or-unparsed-call": "format choice (server policy): a call that does not parse stays raw content; the peer drops it or sends a partial call",
    "D argument-typing": "format choice: argument values typed by the template's value parser / schema; the peer keeps strings (or the reverse)",
    "E text-around-calls": "format choice: text after or between calls kept as content (joined); the peer drops it or joins differently",
    "F peer-misses-calls": "peer behaviour: a call our template accepts (variant framing, several blocks) that the peer leaves as text or drops",
    "G peer-finds-more-calls": "format choice: text the peer takes for a call that our template keeps as content",
    "H argument-values": "same calls, different argument values (value parsing of the format): review",
    "R thinking-split": "same calls, thinking split differently: the peer keeps the opener, assumes thinking without one, or needs a chat-template flag",
    "Z other": "unclassified: review",
}


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
    print("# ENGINE ENTRY/CASE MODE [CLASS]: KEYS differ | ours=... | theirs=...")
    print("# classes (the first rule that fits; bench/engines.py classify):")
    for kind, meaning in CLASSES.items():
        print(f"#   {kind}: {meaning}")
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
                        kind = classify(ours, theirs)
                        totals[f"class {kind}"] += 1
                        print(
                            f"vllm {label} {mode} [{kind}]: {keys} differ | ours={short({k: ours[k] for k in keys})} | theirs={short({k: theirs[k] for k in keys})}"
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
                    kind = classify(ours, theirs)
                    totals[f"class {kind}"] += 1
                    print(
                        f"sglang {label} {mode} [{kind}]: {keys} differ | ours={short({k: ours[k] for k in keys})} | theirs={short({k: theirs[k] for k in keys})}"
                    )
    print("# totals")
    for key in sorted(totals):
        print(f"# {key}: {totals[key]}")


if __name__ == "__main__":
    main()

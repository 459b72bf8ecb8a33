"""The argument parser of every command, and the dispatch to the module that runs it.

Build commands are declared here without importing the compiler; their module
(`cli.build`) is imported only when one of them runs, so `parse` and `parse-jsonl` load
the runtime and one generated module, nothing more.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from integrations.batch import UnknownModel

from . import jsonl, parse
from .common import UsageError, entry_name, report

DESCRIPTION = """\
Compile transformers response templates and parse model output with them. Build commands:
compile NAME | compile-all | check | show NAME | lint [NAME...] | catalog [--write]. Parse
commands: parse --model NAME [FILE] | parse-jsonl --model NAME IN OUT."""

BUILD_COMMANDS = ("compile", "compile-all", "check", "show", "lint", "catalog")


def _declare_build_commands(commands: Any) -> None:
    """The build commands' options (cli.build, which runs them, imports the compiler)."""
    out_help = (
        "write the module(s) into directory DIR instead of generated/ (required when "
        "running from an installed package)"
    )
    compile_one = commands.add_parser(
        "compile", help="write generated/NAME.py from templates_catalog/NAME.json"
    )
    compile_one.add_argument("name")
    compile_one.add_argument("--out", metavar="DIR", help=out_help)
    compile_all = commands.add_parser("compile-all", help="rebuild every catalog entry")
    compile_all.add_argument("--out", metavar="DIR", help=out_help)
    commands.add_parser("check", help="fail if generated/ differs from a fresh build")
    show = commands.add_parser("show", help="print the module NAME compiles to")
    show.add_argument("name")
    lint_cmd = commands.add_parser("lint", help="lint catalog entries (all if none named)")
    lint_cmd.add_argument("names", nargs="*")
    command = commands.add_parser(
        "catalog",
        help="print a markdown table of the catalog",
        description="Print a markdown table of the catalog: one row per entry with its models, "
        "the delimiters of each field, its format (v1 or the extensions it uses) and its "
        "number of fixture cases (0 from an installed package, which ships no tests).",
    )
    command.add_argument(
        "--write", action="store_true", help="also write the table to templates_catalog/README.md"
    )


def make_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    _declare_build_commands(commands)
    parse.add_command(commands)
    jsonl.add_command(commands)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = make_parser(prog).parse_args(argv)
    try:
        if args.command in ("parse", "parse-jsonl"):
            args.model = entry_name(args.model)
        if args.command == "parse":
            return parse.run(args)
        if args.command == "parse-jsonl":
            return jsonl.run(args)
        from . import build

        return build.run(args)
    except (UnknownModel, UsageError) as error:
        report(error)
        return 2
    except BrokenPipeError:
        # The reader of stdout went away (`... | head`): stop quietly, as a command killed
        # by SIGPIPE does, with its status, and point stdout at /dev/null so that the
        # interpreter's flush at exit does not fail on the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE (13), a shell's status for a command it killed


if __name__ == "__main__":
    sys.exit(main())

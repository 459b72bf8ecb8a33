"""Build commands: python -m compiler {compile NAME | compile-all | check | show NAME}."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import catalog
from .errors import TemplateError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compiler", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_one = commands.add_parser(
        "compile", help="write generated/NAME.py from templates_catalog/NAME.json"
    )
    compile_one.add_argument("name")
    commands.add_parser("compile-all", help="rebuild every catalog entry")
    commands.add_parser("check", help="fail if generated/ differs from a fresh build")
    show = commands.add_parser("show", help="print the module NAME compiles to")
    show.add_argument("name")
    args = parser.parse_args(argv)

    try:
        if args.command == "compile":
            files = {Path(catalog.GENERATED) / f"{args.name}.py": catalog.build_module(args.name)}
            _report(catalog.write(files))
        elif args.command == "compile-all":
            _report(catalog.write(catalog.build_all()))
        elif args.command == "check":
            problems = catalog.check()
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                return 1
            print(
                f"generated/ matches a fresh build of {len(catalog.entry_names())} catalog entries"
            )
        elif args.command == "show":
            sys.stdout.write(catalog.build_module(args.name))
    except TemplateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _report(written: list[Path]) -> None:
    for path in written:
        print(f"wrote {path.as_posix()}")
    if not written:
        print("up to date")


if __name__ == "__main__":
    sys.exit(main())

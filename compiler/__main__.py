"""Build commands: python -m compiler {compile NAME | compile-all | check | show NAME | lint [NAME...]}."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import catalog
from .errors import TemplateError
from .lint import lint_entry, unwaived


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
    lint_cmd = commands.add_parser("lint", help="lint catalog entries (all if none named)")
    lint_cmd.add_argument("names", nargs="*")
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
        elif args.command == "lint":
            return _lint(args.names or catalog.entry_names())
    except TemplateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _lint(names: list[str]) -> int:
    failing = 0
    for name in names:
        findings, waivers = lint_entry(name)
        blocking = unwaived(findings, waivers)
        failing += len(blocking)
        for finding in findings:
            reason = waivers.get(finding.key) if finding.severity != "info" else None
            print(f"{name}: {finding}" + (f" (waived: {reason})" if reason else ""))
    print(f"lint: {len(names)} entries, {failing} unwaived finding(s)")
    return 1 if failing else 0


def _report(written: list[Path]) -> None:
    for path in written:
        print(f"wrote {path.as_posix()}")
    if not written:
        print("up to date")


if __name__ == "__main__":
    sys.exit(main())

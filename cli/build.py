"""The build commands: compile, compile-all, check, show, lint, catalog. They import the
compiler (jinja2, black), which the parse commands never do.

In a repository checkout they read templates_catalog/ and write generated/. From an
installed wheel the read-only ones (check, show, lint, catalog) work on the package data;
compile and compile-all write into a directory given with --out, never into
site-packages, and catalog --write needs a checkout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import templates_catalog
from compiler import catalog, catalog_index
from compiler.errors import TemplateError
from compiler.lint import lint_entry, unwaived

from .common import UsageError, write_stdout


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except TemplateError as error:
        raise UsageError(str(error)) from None


def _run(args: argparse.Namespace) -> int:
    if not catalog.entry_names():  # a broken install would otherwise "pass" on nothing
        raise UsageError(
            f"no catalog entries in {templates_catalog.path('x').parent}: "
            "the templates_catalog package data is missing"
        )
    if args.command == "compile":
        if args.out is None:  # generated/ of the checkout: the module and the index
            files = catalog.build_entry(args.name)
        else:  # a directory of modules: the index lists the whole catalog, so not there
            files = {Path(catalog.GENERATED) / f"{args.name}.py": catalog.build_module(args.name)}
        _report(_write(files, args.out))
    elif args.command == "compile-all":
        _report(_write(catalog.build_all(), args.out))
    elif args.command == "check":
        problems = catalog.check()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 1
        print(f"generated/ matches a fresh build of {len(catalog.entry_names())} catalog entries")
    elif args.command == "show":
        write_stdout(catalog.build_module(args.name))
    elif args.command == "lint":
        return _lint(args.names or catalog.entry_names())
    elif args.command == "catalog":
        write_stdout(catalog_index.index())
        if args.write:
            if not catalog.in_checkout():
                raise UsageError("catalog --write updates a repository checkout's README")
            print(f"wrote {catalog_index.write().as_posix()}", file=sys.stderr)
    return 0


def _write(files: dict[Path, str], out: str | None) -> list[Path]:
    if out is None:
        if not catalog.in_checkout():
            raise UsageError(
                f"this is an installed package ({catalog.generated_dir()}): compile writes "
                "generated/ of a repository checkout; give --out DIR to write the modules there"
            )
        return catalog.write(files)
    directory = Path(out)
    written = []
    for relative, text in files.items():
        target = directory / relative.name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            directory.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


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

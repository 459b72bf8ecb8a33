"""The `response-templates` command line (also `python -m cli`, and `python -m compiler`).

`cli.app` holds the argument parser and dispatches: the parse commands (`parse`,
`parse-jsonl`, in `cli.parse` and `cli.jsonl`) need only the runtime, `generated/` and
`templates_catalog`, so parsing never imports the compiler; the build commands
(`compile`, `check`, `show`, `lint`, `catalog`, in `cli.build`) import it when they run.
"""

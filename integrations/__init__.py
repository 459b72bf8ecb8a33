"""Optional integrations with other libraries; each module imports its library itself.

`integrations.transformers` routes a transformers tokenizer's response parsing through the
compiled parsers. `integrations.batch` parses records, columnar batches and blocks of
JSON-lines files (standard library only: `parse-jsonl` runs it); `integrations.ray` and
`integrations.dask` run it on Ray Data and Dask (the `ray` and `dask` extras).
`integrations.openai` shapes messages and parser events as Chat Completions messages and
chunks (`integrations.call_arguments` streams tool-call arguments), which
`integrations.serving`, `integrations.vllm` and `integrations.sglang` plug into vLLM and
SGLang. Nothing in
`compiler/`, `runtime/` or `generated/` imports from here.
"""

"""Optional integrations with other libraries; each module imports its library itself.

`integrations.transformers` routes a transformers tokenizer's response parsing through the
compiled parsers. Nothing in `compiler/`, `runtime/` or `generated/` imports from here.
"""

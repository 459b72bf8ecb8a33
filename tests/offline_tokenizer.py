"""A real transformers tokenizer built offline: byte-level BPE trained on given texts.

Its vocabulary holds SmolLM3's special tokens, and it carries the catalog's smollm3
response template, so `tokenizer.parse_response` works on it as on the real one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from compiler.catalog import ROOT

SPECIAL_TOKENS = [
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
]
SMOLLM3: dict[str, Any] = json.loads(
    (ROOT / "templates_catalog" / "smollm3.json").read_text(encoding="utf-8")
)["response_template"]


def smollm3_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """A small BPE tokenizer trained on `texts`, with SmolLM3's special tokens and template."""
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    model.train_from_iterator(list(texts) * 3, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=model, clean_up_tokenization_spaces=False)
    wrapped.response_template = copy.deepcopy(SMOLLM3)
    return wrapped

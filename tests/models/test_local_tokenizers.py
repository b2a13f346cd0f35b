"""The built-in tokenizers: deterministic, within the vocab budget, no [UNK] for ASCII, exact bytes."""

from __future__ import annotations

import string
import subprocess
import sys

import pytest

from reference_server.workloads.models.local_tokenizers import (
    byte_level_tokenizer,
    wordpiece_tokenizer,
    wordpiece_vocab,
)

ASCII_TEXT = string.printable.strip() + " Queued requests, batched: 8x faster?"


def test_wordpiece_vocab_is_deterministic_and_within_budget() -> None:
    assert wordpiece_vocab(30522) == wordpiece_vocab(30522)
    assert len(wordpiece_vocab(200)) == 200
    assert list(wordpiece_vocab(30522))[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_wordpiece_encodes_any_ascii_without_unk() -> None:
    tok = wordpiece_tokenizer(1024)
    ids = tok(ASCII_TEXT)["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.unk_token_id not in ids and max(ids) < len(tok) <= 1024
    assert tok.decode(ids, skip_special_tokens=True).replace(" ", "") == ASCII_TEXT.lower().replace(" ", "")


def test_wordpiece_pads_a_batch() -> None:
    batch = wordpiece_tokenizer(1024)(["a", "a longer text"], padding=True)
    assert len(batch["input_ids"][0]) == len(batch["input_ids"][1])
    assert batch["attention_mask"][0].count(0) > 0


@pytest.mark.parametrize("text", [ASCII_TEXT, "naïve café, 日本語, emoji 🙂"])
def test_byte_level_round_trips_exactly(text: str) -> None:
    tok = byte_level_tokenizer(1024)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text and max(ids) < len(tok) <= 1024


def test_byte_level_is_deterministic() -> None:
    assert byte_level_tokenizer(1024).get_vocab() == byte_level_tokenizer(1024).get_vocab()


VOCAB_DIGEST = """
import hashlib, json
from reference_server.workloads.models.local_tokenizers import byte_level_tokenizer, wordpiece_tokenizer
vocabs = [sorted(t.get_vocab().items()) for t in (wordpiece_tokenizer(1024), byte_level_tokenizer(1024))]
print(hashlib.sha256(json.dumps(vocabs).encode()).hexdigest())
"""


def test_same_ids_in_every_process() -> None:
    """Token ids must not depend on the process (hash seeds): runs are comparable across restarts."""
    digests = {
        subprocess.run(
            [sys.executable, "-c", VOCAB_DIGEST], capture_output=True, text=True, check=True, timeout=120
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(digests) == 1 and len(digests.pop()) == 64

"""Tokenizers that need no download: trained in-process on a small built-in corpus.

A random-init model has no tokenizer to fetch, and a local model directory may ship none. Then we
build one with the `tokenizers` library from the corpus below (a few milliseconds, deterministic):

* `wordpiece_tokenizer`: BERT-style (lowercase, [CLS] ... [SEP], "##" continuations) over a vocabulary
  constructed from the corpus words (WordPieceTrainer's ties are not deterministic across processes).
  Every printable ASCII character is in it both as a word start and as a continuation, so any ASCII
  text encodes without [UNK]; other characters become [UNK].
* `byte_level_tokenizer`: GPT-2-style byte-level BPE trained on the corpus; every byte sequence encodes
  and decodes exactly.

Token quality is irrelevant for random weights; what matters is a realistic tokens-per-word ratio and
that the ids stay below the model's vocab_size.
"""

from __future__ import annotations

import string
from collections import Counter
from typing import Any

CORPUS = """\
A queue sits between the users and the model. Requests arrive at random times, wait for a free worker,
and leave when the model has answered. When the queue is short the wait is short; when requests arrive
faster than the model can serve them, the queue grows and every new request waits longer than the last.
Batching lets one forward pass answer several requests at once. On a graphics card a batch of eight costs
little more than a batch of one, so throughput rises almost eightfold; on a small processor the gain is
modest, because the arithmetic already keeps every core busy.
The image classifier resizes each picture to a square, scales the pixel values, and predicts one of a
thousand labels. The text classifier splits a sentence into word pieces, adds special tokens at the start
and the end, and predicts whether the review is positive or negative. The speech model listens to one
second of audio sampled sixteen thousand times per second and names the spoken keyword.
The language model reads a prompt and writes the next word, then the next, streaming each new token to
the user as soon as it is ready. Time to first token matters to people who watch the words appear.
Engineers measure latency percentiles, throughput in requests per second, queue wait and service time.
They tune the concurrency limit, the maximum batch size and the number of worker threads, then run the
same load again and compare the numbers. Good numbers come from honest clocks: open-loop arrivals,
intended send times, and no coordinated omission.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. How vexingly quick
daft zebras jump! Sphinx of black quartz, judge my vow. 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14 50%
"""

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
END_OF_TEXT = "<|endoftext|>"
SUFFIXES = ("s", "es", "ed", "er", "ers", "ing", "ly", "tion", "ment", "ness", "able", "ful", "est", "al")


def _corpus_lines() -> list[str]:
    return [line for line in CORPUS.splitlines() if line.strip()]


def wordpiece_vocab(vocab_size: int) -> dict[str, int]:
    """Deterministic WordPiece vocab: specials, every character (start and "##" continuation),
    common English suffixes, then the corpus words by frequency (ties alphabetical)."""
    from tokenizers import normalizers, pre_tokenizers

    chars = sorted(set(string.printable.strip().lower()))
    normalizer = normalizers.BertNormalizer(lowercase=True)
    splitter = pre_tokenizers.BertPreTokenizer()
    counts = Counter(
        word
        for line in _corpus_lines()
        for word, _ in splitter.pre_tokenize_str(normalizer.normalize_str(line))
        if len(word) > 1
    )
    words = sorted(counts, key=lambda w: (-counts[w], w))
    pieces = [*WORDPIECE_SPECIALS, *chars, *(f"##{c}" for c in chars), *(f"##{s}" for s in SUFFIXES), *words]
    unique = list(dict.fromkeys(pieces))[:vocab_size]
    return {piece: i for i, piece in enumerate(unique)}


def wordpiece_tokenizer(vocab_size: int) -> Any:
    """A BERT-style fast tokenizer with at most `vocab_size` ids."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = wordpiece_vocab(vocab_size)
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def byte_level_tokenizer(vocab_size: int) -> Any:
    """A GPT-2-style byte-level BPE fast tokenizer with at most `vocab_size` ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus_lines(), trainer)
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        unk_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
    )

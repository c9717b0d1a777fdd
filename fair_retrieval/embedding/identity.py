"""Which embedder made a set of vectors: one JSON definition, and the check a saved store runs on load.

Vectors from two embedder configurations are not comparable: another model, pooling, window, long-document policy,
calibration or LPES factors move every document vector. A store that records the identity of the embeddings it
was built with can refuse, on load, embeddings that would mix incompatible vectors into it (or search it with
queries from another space) instead of silently returning poor results.

- `embedder_identity(embeddings)`: the identity of a `FairEmbedder` (`FairEmbedder.identity()`), of an adapter
  holding one (LangChain's `FairEmbeddings`, LlamaIndex's `FairEmbedding`, found by duck typing: this module
  imports neither framework), or of any other embeddings object: {"class": its qualified class name, "model": its
  `model_name` / `model` string, or None}.
- `identity_differences(recorded, current)`: the fields that differ, for messages.
- `check_identity(...)`: the load-time rule the stores share: no identity recorded (an earlier release) → an INFO
  line; a different one → a ValueError listing the fields, unless the caller allows the mismatch (a WARNING).
- `identity_settings(identity)`: the model, options and prompts that rebuild the embedder an identity records (what
  `fair-retrieval search` embeds a store folder's queries with).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.embedding.loading import canonical_model_name
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.lpes import PositionalScaling

logger = logging.getLogger(__name__)

IDENTITY_FIELDS: tuple[str, ...] = (
    "model",
    "pooling",
    "max_length",
    "long_documents",
    "window_overlap",
    "window_boundaries",
    "window_tokens",
    "calibration",
    "positional_scaling",
    "document_prompt",
    "query_prompt",
)
"""The fields of a FairEmbedder's identity (`FairEmbedder.identity()`), in the order messages list them."""

_ADAPTER_ATTRIBUTES = ("fair_embedder", "embedder")  # LangChain's FairEmbeddings, LlamaIndex's FairEmbedding
_MODEL_ATTRIBUTES = ("model_name", "model")  # what other embeddings classes call their model
_MISSING = "<not recorded>"
_UNRECORDED_MEANS = {
    "window_boundaries": "tokens",
    "window_tokens": None,
}  # fields added later: what a record without them was made with


def fair_embedder_of(embeddings: Any) -> FairEmbedder | None:
    """The `FairEmbedder` of `embeddings`: itself, the one an adapter holds under `fair_embedder` or `embedder`, or
    None for any other embeddings object."""
    if isinstance(embeddings, FairEmbedder):
        return embeddings
    for attribute in _ADAPTER_ATTRIBUTES:
        inner = getattr(embeddings, attribute, None)
        if isinstance(inner, FairEmbedder):
            return inner
    return None


def embedder_identity(embeddings: Any) -> dict[str, Any]:
    """The JSON-compatible identity of `embeddings`: what decides the vectors it makes.

    Args:
        embeddings: a `FairEmbedder`; an object holding one under `fair_embedder` or `embedder` (the LangChain and
            LlamaIndex adapters), whose own `calibration` attribute, when it has one, replaces the embedder's
            (the adapters pass it on every call); or any other embeddings object.

    Returns:
        `FairEmbedder.identity()` for the first two; {"class": "module.QualifiedName", "model": str or None} for
        any other object (its `model_name` or `model` attribute when that is a string).
    """
    if isinstance(embeddings, FairEmbedder):
        return embeddings.identity()
    inner = fair_embedder_of(embeddings)
    if inner is not None:
        identity = inner.identity()
        calibration = getattr(embeddings, "calibration", inner.calibration)
        if calibration is None or isinstance(calibration, Calibration):
            identity["calibration"] = calibration.to_dict() if calibration is not None else None
        return identity
    cls = type(embeddings)
    model = next(
        (value for name in _MODEL_ATTRIBUTES if isinstance(value := getattr(embeddings, name, None), str)), None
    )
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "model": model}


def identity_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields in which two identities differ: field → (recorded value, current value).

    A field only one of them has counts as a difference (its other value is shown as "<not recorded>"). Values
    are compared as JSON, with these equivalences: a record without `window_boundaries` or `window_tokens` was made with
    token windows of the whole window (the only kind before the options existed), the default model's names
    (`canonical_model_name`), a calibration dict and the same `Calibration` written by another release (defaults filled
    in), and LPES factors without the control points they were drawn from (not part of `PositionalScaling` equality).
    """
    differences: dict[str, tuple[Any, Any]] = {}
    order = [*IDENTITY_FIELDS, *sorted((set(recorded) | set(current)) - set(IDENTITY_FIELDS))]
    for field in order:
        if field not in recorded and field not in current:
            continue
        implied = _UNRECORDED_MEANS.get(field, _MISSING)
        old, new = recorded.get(field, implied), current.get(field, implied)
        if _MISSING in (old, new) or _comparable(field, old) != _comparable(field, new):
            differences[field] = (old, new)
    return differences


def describe_differences(differences: Mapping[str, tuple[Any, Any]]) -> str:
    """One line for a message: "model: 'a' (recorded) ≠ 'b' (now); pooling: …"."""
    return "; ".join(
        f"{field}: {_short(old)} (recorded) ≠ {_short(new)} (now)" for field, (old, new) in differences.items()
    )


def check_identity(
    recorded: Any,
    current: Mapping[str, Any],
    *,
    source: str,
    allow_mismatch: bool,
    override: str,
    remedy: str,
    unrecorded: str = "saved by an earlier release",
) -> None:
    """Check that `current` (the embeddings given on load) is the embedder that made the vectors of `source`.

    Args:
        recorded: the identity saved with the vectors; None for data saved before identities were recorded (an INFO
            line says it cannot be checked).
        current: the identity of the embeddings given now (`embedder_identity`).
        source: what is being loaded, for messages (a path).
        allow_mismatch: log a WARNING instead of raising (the caller's explicit override).
        override: how the caller overrides, for the message (e.g. "allow_embedder_mismatch=True").
        remedy: what else to do, for the message (e.g. which embeddings to load it with).
        unrecorded: why `recorded` may be None, for the INFO line (an earlier release by default; a store saved
            without being told its embedder says so).

    Raises:
        ValueError: if the identities differ and `allow_mismatch` is False, or `recorded` is not a JSON object.
    """
    if recorded is None:
        logger.info(
            "%s records no embedder (%s): cannot check that the embeddings given now made its vectors.",
            source,
            unrecorded,
        )
        return
    if not isinstance(recorded, Mapping):
        raise ValueError(
            f"{source} records its embedder as a {type(recorded).__name__}, not a JSON object: the file was edited "
            f"or damaged. Save it again, or pass {override} to skip the check."
        )
    differences = identity_differences(recorded, current)
    if not differences:
        return
    text = describe_differences(differences)
    if allow_mismatch:
        logger.warning(
            "%s was built by another embedder configuration (%s); using it anyway (%s): stored and new vectors may "
            "not be comparable.",
            source,
            text,
            override,
        )
        return
    raise ValueError(
        f"{source} was built by another embedder configuration: {text}. Its vectors and those of the embeddings "
        f"given now are not comparable. {remedy} Or pass {override} to use it anyway."
    )


def _comparable(field: str, value: Any) -> Any:
    """`value` in the form two identities are compared in (see `identity_differences`)."""
    if field == "model":
        value = canonical_model_name(value)
    elif field == "calibration" and isinstance(value, Mapping):
        with contextlib.suppress(TypeError, ValueError):  # else compared as written
            value = Calibration.from_dict(dict(value)).to_dict()
    elif field == "positional_scaling" and isinstance(value, Mapping):
        with contextlib.suppress(TypeError, ValueError):
            value = list(PositionalScaling.from_dict(dict(value)).factors)
    try:
        return json.loads(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        return repr(value)


def _short(value: Any, limit: int = 120) -> str:
    text = value if value == _MISSING else json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def identity_settings(identity: Mapping[str, Any]) -> tuple[str, EmbedderOptions, dict[str, str]]:
    """What rebuilds the `FairEmbedder` a store's identity records (`FairEmbedder.identity()`): the model, the
    options and the prompts (`build_embedder`'s), so that a saved store is searched with the embedder that built
    it. Fields of the store's mode in the identity (multivector, aggregate, window shape) are not the embedder's and
    are left out.

    Raises:
        ValueError: an identity of other embeddings than fair-retrieval's (it names their class), or one whose
            values `EmbedderOptions` refuses (a damaged record).
    """
    model = identity.get("model")
    if "class" in identity or not isinstance(model, str) or not model:
        raise ValueError(
            f"The store was built with {identity.get('class') or 'embeddings'} (model {model!r}), not a "
            "fair-retrieval embedder, which can be rebuilt from its record: search it with those embeddings."
        )
    calibration = identity.get("calibration")
    scaling = identity.get("positional_scaling")
    options = EmbedderOptions(
        calibration=Calibration.from_dict(calibration) if isinstance(calibration, dict) else None,
        pooling=identity.get("pooling"),
        max_length=identity.get("max_length"),
        positional_scaling=PositionalScaling.from_dict(scaling) if isinstance(scaling, dict) else None,
        long_documents=identity.get("long_documents", "windows"),
        window_overlap=identity.get("window_overlap"),
        window_boundaries=identity.get("window_boundaries", _UNRECORDED_MEANS["window_boundaries"]),
        window_tokens=identity.get("window_tokens"),
    )
    prompts = {
        name: identity.get(f"{name}_prompt") or "" for name in ("query", "document") if f"{name}_prompt" in identity
    }
    return model, options, prompts

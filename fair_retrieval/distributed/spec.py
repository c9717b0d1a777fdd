"""EmbedderSpec: everything a Ray worker needs to build the same `FairEmbedder` as the driver would.

A worker cannot receive a loaded model cheaply (it would be pickled into every task), so the driver sends this small
recipe instead and each worker builds the embedder once. The recipe is also the fingerprint of a shard folder: a
resumed job must embed with exactly the settings that made the shards already written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.lpes import PositionalScaling

if TYPE_CHECKING:
    from fair_retrieval.embedding.embedder import FairEmbedder

_NOT_IN_FINGERPRINT = ("batch_size", "device", "show_progress_bar", "model_kwargs")
"""Options that do not change the vectors (up to floating-point noise), so a job may resume with others; model_kwargs
are never shipped to workers."""


@dataclass(frozen=True, init=False)
class EmbedderSpec:
    """How to build the document embedder on each worker: a model and the `EmbedderOptions` to load it with.

    Build one as `EmbedderSpec(model, batch_size=64, ...)` with any `FairEmbedder` option (names, defaults and
    validation are `EmbedderOptions`'), or with `EmbedderSpec.from_options(model, options)`.

    Args:
        model: a Hub id or a folder that every worker can read (on a cluster: a shared path, or a Hub id with the
            model in each node's cache). A local folder is recorded as an absolute path.
        **options: `EmbedderOptions` fields, with two differences a worker needs: `device` is a str or None, and None
            lets each worker choose ("cuda" when it was given a GPU, else "cpu"); `model_kwargs` cannot be shipped.

    Raises:
        TypeError: for a model that is not a Hub id or folder, a device that is not a str, model_kwargs, or an
            invalid option (as `EmbedderOptions`).
        ValueError: for an invalid option value (as `EmbedderOptions`), on the driver rather than on every worker.
    """

    model: str
    embedder_options: EmbedderOptions

    def __init__(self, model: str | os.PathLike[str], **options: Any) -> None:
        if not isinstance(model, str | os.PathLike) or not str(model):
            raise TypeError(
                f"model must be a Hub id or a folder path (a str) that the Ray workers can load, got "
                f"{type(model).__name__}; a loaded SentenceTransformer cannot be shipped to workers."
            )
        checked = EmbedderOptions(**options)  # invalid settings fail here, on the driver, not on every worker
        if checked.model_kwargs is not None:
            raise TypeError("EmbedderSpec does not forward model_kwargs to Ray workers; leave them unset.")
        if checked.device is not None and not isinstance(checked.device, str):
            raise TypeError(f"device must be a str for Ray workers (e.g. 'cuda'), got {type(checked.device).__name__}.")
        path = Path(str(model)).expanduser()
        object.__setattr__(self, "model", str(path.resolve()) if path.exists() else str(model))
        object.__setattr__(self, "embedder_options", checked)

    @classmethod
    def from_options(cls, model: str | os.PathLike[str], options: EmbedderOptions) -> EmbedderSpec:
        """The spec of `options` for `model`, so a caller that holds `EmbedderOptions` forwards every option.

        Raises:
            TypeError: for options a worker cannot receive: `model_kwargs`, or a `torch.device` (pass its name).
        """
        return cls(model, **options.to_kwargs())

    def options(self) -> EmbedderOptions:
        """The `FairEmbedder` options this spec describes (device as given: None lets `build` choose)."""
        return self.embedder_options

    def build(self, has_gpu: bool = False) -> FairEmbedder:
        """Load the embedder (on a worker). Without an explicit `device`, a worker given a GPU uses "cuda"."""
        device = self.embedder_options.device or ("cuda" if has_gpu else "cpu")
        return build_embedder(replace(self.embedder_options, device=device), self.model)

    def fingerprint(self) -> dict[str, Any]:
        """The settings that determine the vectors (JSON-compatible): the model and every option but batch size,
        device and progress bar, which do not, up to floating-point noise, so a job may resume on other hardware."""
        found: dict[str, Any] = {"model": self.model}
        for name in EmbedderOptions.names():
            value = getattr(self.embedder_options, name)
            if name not in _NOT_IN_FINGERPRINT:
                found[name] = value.to_dict() if isinstance(value, Calibration | PositionalScaling) else value
        return found

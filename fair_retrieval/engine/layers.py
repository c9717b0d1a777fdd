"""Where a transformers model keeps its stack of transformer layers (one finder for every engine hook).

Both hooks that reach inside a model need the i-th transformer layer: attention calibration maps each attention
module to its layer index, and LPES scales the rotary angles a layer receives. They find the stack the same way,
here: the `nn.ModuleList` whose length is the config's `num_hidden_layers`.
"""

from __future__ import annotations

from torch import nn


class UnsupportedModelError(ValueError):
    """The model cannot be hooked: it computes attention outside transformers' `ALL_ATTENTION_FUNCTIONS`, has no
    recognisable stack of layers, or lacks what a feature needs (e.g. rotary position embeddings for LPES)."""


def layer_stack(model: nn.Module, model_name: str) -> nn.ModuleList:
    """Return the model's transformer layers, in order.

    Args:
        model: a transformers model (its `config.num_hidden_layers` says how many layers to look for).
        model_name: how the model is named in error messages.

    Raises:
        UnsupportedModelError: if no `nn.ModuleList` holds exactly `num_hidden_layers` modules.
    """
    num_layers = int(getattr(getattr(model, "config", None), "num_hidden_layers", 0) or 0)
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and num_layers > 0 and len(module) == num_layers:
            return module
    raise UnsupportedModelError(
        f"{model_name}: could not find its {num_layers} transformer layers (an nn.ModuleList of that length)."
    )


def layer_of_module(model: nn.Module, model_name: str) -> dict[int, int]:
    """Map id() of every submodule of the i-th transformer layer to i.

    Raises:
        UnsupportedModelError: as `layer_stack`.
    """
    return {id(sub): index for index, layer in enumerate(layer_stack(model, model_name)) for sub in layer.modules()}

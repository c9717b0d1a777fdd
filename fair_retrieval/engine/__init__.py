"""The engine: what happens inside the model's forward pass, and nothing else.

- `calibration`: the attention-calibration configuration (`Calibration`), the method's one set of parameters.
- `attention`: calibrated attention — how it plugs into a transformers model, and the math (tensor shapes in
  comments); `kernels`: the attention kernels it dispatches to (fused where PyTorch has one, explicit tiles
  otherwise).
- `lpes`: LPES, layer-specific RoPE position scaling (`PositionalScaling`) and its installation.
- `layers`: where a transformers model keeps its stack of layers (one finder for every hook).

The engine imports only itself and the top-level leaf helpers (`fair_retrieval.validate`,
`fair_retrieval.frozen_json`); everything above it (embedding, stores, tuning, the CLI) imports it.
"""

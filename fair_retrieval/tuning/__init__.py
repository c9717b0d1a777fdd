"""Tuning: choosing a configuration for a model on dev data, labelled or label-free.

- `calibration_search`: the calibration search space and the search over it (`SearchSpace`, `tune`).
- `lpes_search`: LPES scaling factors searched on a position benchmark; `genetic`: the genetic search over Bézier
  control points that it runs.
"""

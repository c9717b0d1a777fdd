"""Embedding: from texts to vectors with a loaded model, on top of the engine.

- `embedder`: `FairEmbedder`, calibrated document vectors and plain query vectors from one model;
  `embedder_options`: `EmbedderOptions`, its settings declared, defaulted and validated once; `embedder_building`:
  an embedder made from options (the CLI, Ray workers and the adapters build theirs there).
- `loading`: loading a sentence-transformers model and reading its configuration (pooling, window, prompts,
  precision); `pooling`: token vectors to one vector; `windows`: documents longer than the model's window.
- `one_pass`: windows of several sizes from one model pass (`FairEmbedder.embed_multiscale_windows`).
- `identity`: which embedder made a set of vectors, as JSON; `embedding_report`: what an embedding call tells its user.
"""

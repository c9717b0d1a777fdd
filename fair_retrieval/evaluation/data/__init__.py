"""Where evaluation tasks come from: the `RetrievalTask` every benchmark is, and the loaders that build one.

- `task`: `RetrievalTask` (corpus, queries, qrels, answer positions, preset labels) and `AnswerPosition`.
- `tokens`: `TokenCounter`, how builders count tokens as the model does (`tokenizer_counter` wraps a tokenizer).
- `load`: a `--data` value (needle, squad-v2, reddit, xquad:LANG, scifact, cacm, PATH, hub:…) → a task.
- `named`: the named datasets' files, where local copies are looked for, and downloading them into the cache.
- `squad`: position benchmarks from SQuAD-format JSON (paragraphs joined to a token budget).
- `needle`: the synthetic needle benchmark over Python's own docs (no data needed).
- `beir`: BEIR folders and SciFact's CSV release (no answer positions).
- `cacm`: CACM from its SMART files (no answer positions).
- `hub`: the Hugging Face Hub formats of FineWeb-PosQ, SQuAD-PosQ, PosIR and NanoBEIR, and downloading them.
- `records`: rows from JSON Lines, JSON, CSV, TSV and Parquet files, shared by the loaders.

Scoring a task (grouping, metrics, runs, reports) lives one level up, in `fair_retrieval.evaluation`.
"""

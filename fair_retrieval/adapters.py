"""What the framework adapters (the LangChain and LlamaIndex embeddings) build on, apart from what users call.

An adapter wraps `fair_retrieval.FairEmbedder` in another framework's embeddings class; these names let it declare
the same options with the same defaults, documentation and checks, without repeating them:

- `INSTANCE_DEFAULT`: the marker of an argument left at its default.
- `as_calibration`: a `Calibration` from its dict form (what a framework's serialisation gives back).
- `option_doc`: an option's documentation as `EmbedderOptions` declares it (the adapters' field descriptions).
- `resolve_embedder`: a ready `FairEmbedder` or one loaded from a model, never both (the adapters' one rule);
  `adapter_model`: the model an adapter built with none loads (the default model, as the stacks' own classes do).
- `chunk_plan`: the chunk size and overlap of a text splitter feeding an embedder.
- The keywords of the stacks' own embeddings classes (`fair_retrieval.embedding.keywords`): `AdapterSettings`,
  `KeywordReader`, `ST_KEYWORDS`, `check_refused`, `refuse_unknown`, `shared_recipe`; `with_calibration` (a shared
  embedder with another calibration); `one_summary` (one log line per batched call; the embedder itself warns
  about long texts).
- What each adapter does with its constructor (`fair_retrieval.embedding.adapter_constructors`): `llamaindex_keywords`
  (`LlamaIndexKeywords`) and `langchain_keywords` / `langchain_settings` (with `LANGCHAIN_ALIASES`; its renaming
  alone: `langchain_renamed`) read the keywords of llama-index's `HuggingFaceEmbedding` and langchain-huggingface's
  `HuggingFaceEmbeddings`, once per construction; `valid_keywords` lists what a constructor accepts; `ADAPTER_FIELDS`
  documents each field as data; `OPTION_PARAMETERS` are the options taken under their own names; `embedder_values`
  the option values of a built embedder; `recalibrated` a calibration set on a built adapter; `EmbedderRecipe` what
  a pickled adapter loads again (`langchain_recipe`: a pickled `FairEmbeddings`'); `SplitterPlan` a text splitter's
  chunks; `chunk_starts` the chunks' character offsets.

- Text checks every embeddings adapter runs before the model does (`fair_retrieval.inputs`): `ensure_text_list` (a
  list of strings, not one string) and `check_readable` (texts the tokenizer cannot read, refused for a whole
  batch at once), both at once: `readable_texts`.

The vector store adapters build on `fair_retrieval.stores`.
"""

from fair_retrieval.embedding.adapter_constructors import (
    ADAPTER_FIELDS,
    LANGCHAIN_ALIASES,
    OPTION_PARAMETERS,
    EmbedderRecipe,
    LlamaIndexKeywords,
    SplitterPlan,
    chunk_starts,
    embedder_values,
    langchain_keywords,
    langchain_recipe,
    langchain_renamed,
    langchain_settings,
    llamaindex_keywords,
    recalibrated,
    valid_keywords,
)
from fair_retrieval.embedding.embedder_building import resolve_embedder, with_calibration
from fair_retrieval.embedding.embedder_options import INSTANCE_DEFAULT, as_calibration, option_doc
from fair_retrieval.embedding.embedding_report import one_summary
from fair_retrieval.embedding.keywords import (
    ST_KEYWORDS,
    AdapterSettings,
    KeywordReader,
    adapter_model,
    check_refused,
    refuse_unknown,
    shared_recipe,
)
from fair_retrieval.embedding.windows import chunk_plan
from fair_retrieval.inputs import check_readable, ensure_text_list, readable_texts

__all__ = [
    "ADAPTER_FIELDS",
    "INSTANCE_DEFAULT",
    "LANGCHAIN_ALIASES",
    "OPTION_PARAMETERS",
    "ST_KEYWORDS",
    "AdapterSettings",
    "EmbedderRecipe",
    "KeywordReader",
    "LlamaIndexKeywords",
    "SplitterPlan",
    "adapter_model",
    "as_calibration",
    "check_readable",
    "check_refused",
    "chunk_plan",
    "chunk_starts",
    "embedder_values",
    "ensure_text_list",
    "langchain_keywords",
    "langchain_recipe",
    "langchain_renamed",
    "langchain_settings",
    "llamaindex_keywords",
    "one_summary",
    "option_doc",
    "readable_texts",
    "recalibrated",
    "refuse_unknown",
    "resolve_embedder",
    "shared_recipe",
    "valid_keywords",
    "with_calibration",
]

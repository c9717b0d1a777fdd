"""fair-retrieval: dense retrieval that is fair to every part of a document.

Documents are embedded with attention calibration (arXiv 2606.02737) so that a passage whose relevant sentence sits
at its end is found as often as one where it sits at its start; queries stay plain.

The public names, each defined in one module and re-exported here:

- `FairEmbedder`: the embedder (documents calibrated, queries plain); `Calibration` and `PositionalScaling`: how
  documents are calibrated (attention calibration, LPES); `UnsupportedModelError`: a model whose attention cannot be
  calibrated.
- `DocumentWindows`: every window vector of some documents (`FairEmbedder.embed_document_windows`);
  `LongDocuments`: what happens to a document longer than the model's window ("windows" or "truncate");
  `Pooling`: how token vectors become one ("cls", "mean", "last"); `Precision`: the numeric precision of the weights.
- `FaissIndex`, `MultiVectorIndex`, `DocumentHit`: the FAISS vector indices (`fair_retrieval.index` has the rest).
- For wrappers of `FairEmbedder` in other frameworks (the LangChain and LlamaIndex embeddings): `EmbedderOptions`
  (every `FairEmbedder` option, defaulted and checked in one place), `DEFAULTS` (its defaults), `INSTANCE_DEFAULT`
  (an argument left at its default), `as_calibration` (a Calibration from its dict form), `option_doc` (an option's
  documentation, as `EmbedderOptions` declares it: the adapters' field descriptions), `resolve_embedder` (a
  ready `FairEmbedder` or one loaded from a model, never both) and `chunk_plan` (the chunk size and overlap of a
  text splitter feeding an embedder). What vector stores share is in `fair_retrieval.stores`. The adapters' keywords
  (`fair_retrieval.embedding.keywords`): `AdapterSettings`, `KeywordReader`, `ST_KEYWORDS`, `check_refused`,
  `refuse_unknown` and `shared_recipe`; `with_calibration` (a shared embedder with another calibration);
  `one_summary` and `warn_long_texts` (one log line per batched call, the long-text warning).
"""

from fair_retrieval.embedding.building import resolve_embedder, with_calibration
from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.keywords import (
    ST_KEYWORDS,
    AdapterSettings,
    KeywordReader,
    check_refused,
    refuse_unknown,
    shared_recipe,
)
from fair_retrieval.embedding.options import (
    DEFAULTS,
    INSTANCE_DEFAULT,
    EmbedderOptions,
    Precision,
    as_calibration,
    option_doc,
)
from fair_retrieval.embedding.report import one_summary, warn_long_texts
from fair_retrieval.embedding.windows import DocumentWindows, LongDocuments, chunk_plan
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import Pooling, UnsupportedModelError
from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.index import DocumentHit, FaissIndex, MultiVectorIndex
from fair_retrieval.version import __version__ as __version__

__all__ = [
    "DEFAULTS",
    "INSTANCE_DEFAULT",
    "ST_KEYWORDS",
    "AdapterSettings",
    "Calibration",
    "DocumentHit",
    "DocumentWindows",
    "EmbedderOptions",
    "FairEmbedder",
    "FaissIndex",
    "KeywordReader",
    "LongDocuments",
    "MultiVectorIndex",
    "Pooling",
    "PositionalScaling",
    "Precision",
    "UnsupportedModelError",
    "as_calibration",
    "check_refused",
    "chunk_plan",
    "one_summary",
    "option_doc",
    "refuse_unknown",
    "resolve_embedder",
    "shared_recipe",
    "warn_long_texts",
    "with_calibration",
]

"""fair-retrieval: dense retrieval that is fair to every part of a document.

Documents are embedded with attention calibration (arXiv 2606.02737) so that a passage whose relevant sentence sits
at its end is found as often as one where it sits at its start; queries stay plain.

The public names, each defined in one module and re-exported here:

- `FairEmbedder`: the embedder (documents calibrated, queries plain); `Calibration` and `PositionalScaling`: how
  documents are calibrated (attention calibration, LPES); `UnsupportedModelError`: a model whose attention cannot be
  calibrated.
- `DocumentWindows`: every window vector of some documents (`FairEmbedder.embed_document_windows`);
  `LongDocuments`: what happens to a document longer than the model's window ("windows" or "truncate");
  `WindowBoundaries`: where such a document is cut into windows ("text": paragraph and sentence ends; "tokens");
  `Pooling`: how token vectors become one ("cls", "mean", "last"); `Precision`: the numeric precision of the weights.
- `FaissIndex`, `MultiVectorIndex`, `DocumentHit`: the FAISS vector indices (`fair_retrieval.index` has the rest).
- `EmbedderOptions`: every `FairEmbedder` option, defaulted and checked in one place; `DEFAULTS`: its defaults.

What the framework adapters build on is in `fair_retrieval.adapters` (the embeddings' option plumbing; those names
stay importable from here, where earlier releases exported them) and `fair_retrieval.stores` (the vector store).
"""

# The adapters' helpers (`fair_retrieval.adapters`), reachable from here too (earlier releases exported some here).
from fair_retrieval.adapters import ADAPTER_FIELDS as ADAPTER_FIELDS
from fair_retrieval.adapters import LANGCHAIN_ALIASES as LANGCHAIN_ALIASES
from fair_retrieval.adapters import OPTION_PARAMETERS as OPTION_PARAMETERS
from fair_retrieval.adapters import (
    ST_KEYWORDS as ST_KEYWORDS,
)
from fair_retrieval.adapters import (
    AdapterSettings as AdapterSettings,
)
from fair_retrieval.adapters import EmbedderRecipe as EmbedderRecipe
from fair_retrieval.adapters import (
    KeywordReader as KeywordReader,
)
from fair_retrieval.adapters import LlamaIndexKeywords as LlamaIndexKeywords
from fair_retrieval.adapters import SplitterPlan as SplitterPlan
from fair_retrieval.adapters import (
    check_refused as check_refused,
)
from fair_retrieval.adapters import chunk_starts as chunk_starts
from fair_retrieval.adapters import embedder_values as embedder_values
from fair_retrieval.adapters import langchain_keywords as langchain_keywords
from fair_retrieval.adapters import langchain_renamed as langchain_renamed
from fair_retrieval.adapters import langchain_settings as langchain_settings
from fair_retrieval.adapters import llamaindex_keywords as llamaindex_keywords
from fair_retrieval.adapters import (
    one_summary as one_summary,
)
from fair_retrieval.adapters import recalibrated as recalibrated
from fair_retrieval.adapters import (
    refuse_unknown as refuse_unknown,
)
from fair_retrieval.adapters import (
    shared_recipe as shared_recipe,
)
from fair_retrieval.adapters import valid_keywords as valid_keywords
from fair_retrieval.adapters import (
    with_calibration as with_calibration,
)
from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_building import resolve_embedder as resolve_embedder
from fair_retrieval.embedding.embedder_options import DEFAULTS, EmbedderOptions, Precision
from fair_retrieval.embedding.embedder_options import INSTANCE_DEFAULT as INSTANCE_DEFAULT
from fair_retrieval.embedding.embedder_options import as_calibration as as_calibration
from fair_retrieval.embedding.embedder_options import option_doc as option_doc
from fair_retrieval.embedding.windows import DocumentWindows, LongDocuments
from fair_retrieval.embedding.windows import chunk_plan as chunk_plan
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import Pooling, UnsupportedModelError
from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.index import DocumentHit, FaissIndex, MultiVectorIndex
from fair_retrieval.version import __version__ as __version__

__all__ = [
    "DEFAULTS",
    "Calibration",
    "DocumentHit",
    "DocumentWindows",
    "EmbedderOptions",
    "FairEmbedder",
    "FaissIndex",
    "LongDocuments",
    "MultiVectorIndex",
    "Pooling",
    "PositionalScaling",
    "Precision",
    "UnsupportedModelError",
    "WindowBoundaries",
]

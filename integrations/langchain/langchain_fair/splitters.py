"""ModelTokenSplitter: LangChain's recursive splitter measured in a model's tokens, with correct start offsets.

LangChain's `TextSplitter.create_documents` finds each chunk's `start_index` by searching from
"previous start + previous length − chunk_overlap". With a length measured in tokens (`from_huggingface_tokenizer`)
the overlap is in tokens while the offsets are in characters, so the search starts past the chunk and about every
other chunk gets `start_index = -1` (a known LangChain bug). This subclass searches from just after the
previous chunk's start instead, which is a valid lower bound because chunks come in increasing order of start.
"""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter


class ModelTokenSplitter(RecursiveCharacterTextSplitter):
    """`RecursiveCharacterTextSplitter` whose `start_index` metadata is right when its length is in tokens."""

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """Split `texts` into Documents; with `add_start_index`, each holds the character offset of its chunk."""
        metadatas = metadatas or [{}] * len(texts)
        documents = []
        for text, metadata in zip(texts, metadatas, strict=True):
            search_from = 0
            for chunk in self.split_text(text):
                chunk_metadata = copy.deepcopy(metadata)
                if self._add_start_index:
                    start = text.find(chunk, search_from)
                    chunk_metadata["start_index"] = start
                    search_from = start + 1 if start >= 0 else search_from
                documents.append(Document(page_content=chunk, metadata=chunk_metadata))
        return documents

"""ModelTokenSplitter: LangChain's recursive splitter measured in a model's tokens, with correct start offsets.

LangChain's `TextSplitter.create_documents` finds each chunk's `start_index` from the previous chunk's length minus
the overlap, which with an overlap counted in tokens points past the chunk (a known LangChain bug); the offsets here
are `fair_retrieval.adapters.chunk_starts`', which says why they are right.
"""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from fair_retrieval.adapters import chunk_starts


class ModelTokenSplitter(RecursiveCharacterTextSplitter):
    """`RecursiveCharacterTextSplitter` whose `start_index` metadata is right when its length is in tokens."""

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """Split `texts` into Documents; with `add_start_index`, each holds the character offset of its chunk."""
        documents = []
        for text, metadata in zip(texts, metadatas or [{}] * len(texts), strict=True):
            chunks = self.split_text(text)
            for chunk, start in zip(chunks, chunk_starts(text, chunks), strict=True):
                chunk_metadata = copy.deepcopy(metadata)
                if self._add_start_index:
                    chunk_metadata["start_index"] = start
                documents.append(Document(page_content=chunk, metadata=chunk_metadata))
        return documents

"""LlamaIndex nodes as `FairFaissVectorStore` keeps them: their ids and JSON form (`BaseNode.to_dict()`, without
the embedding, which is in the index), and new node objects made from it (callers cannot change the store)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from llama_index.core.constants import DATA_KEY, TYPE_KEY
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.storage.docstore.utils import json_to_doc

from fair_retrieval.stores import BEST_WINDOW_KEY, DocumentStore

__all__ = [
    "StoredNode",
    "document_node",
    "head_node",
    "hit_nodes",
    "node_contents",
    "node_document",
    "node_head",
    "node_metadata",
    "node_text",
    "restored_node",
    "stored_nodes",
]


class StoredNode(NamedTuple):
    """A stored node: its ids and its JSON form (`doc_to_json` without the embedding, which is in the index)."""

    key: str  # the node id
    doc_id: str  # the node's ref_doc_id, or its own id when it has no source document
    node: dict[str, Any]


def stored_nodes(nodes: Sequence[Any]) -> list[StoredNode]:
    """The nodes' records: each node's JSON form without the embedding, checked to survive JSON (what persist
    writes); every node is checked before any record is made, and every offending one named at once.

    Raises:
        TypeError: not a node, or metadata that is not JSON.
        ValueError: an empty text or id, a lone surrogate, or metadata under a reserved key ("best_window":
            `fair_retrieval.stores.DocumentStore.check_entries`).
    """
    for position, node in enumerate(nodes):
        if not isinstance(node, BaseNode):
            raise TypeError(f"nodes[{position}] is {type(node).__name__}, expected a llama-index node (TextNode, …).")
    texts = [node.text if isinstance(node, TextNode) else None for node in nodes]  # other nodes (images, …): no text
    DocumentStore.check_entries(texts, [node.node_id for node in nodes], [node.metadata for node in nodes])
    return [_stored(node) for node in nodes]


def _stored(node: BaseNode) -> StoredNode:
    data = node.to_dict()
    data["embedding"] = None  # the vector lives in the index
    try:
        payload = json.loads(json.dumps({DATA_KEY: data, TYPE_KEY: node.get_type()}, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"Node {node.node_id!r} cannot be stored as JSON ({error}). FairFaissVectorStore keeps and persists nodes "
            "as JSON, never pickle: make its metadata values str, int, float, bool, None, lists or dicts (a date as "
            ".isoformat(), no NaN)."
        ) from None
    return StoredNode(node.node_id, node.ref_doc_id or node.node_id, payload)


def document_node(document: Any) -> StoredNode:
    """The record of a document of a store of texts (`fair-retrieval index`, LangChain's store: its `key`, `text`
    and `metadata`) as a `TextNode` of the same id, text and metadata. Its vectors were embedded from the text
    alone, so every metadata key is kept out of the embedded text (`excluded_embed_metadata_keys`): what the node
    embeds, and what the lexical side reads, is the text its vectors are of."""
    metadata = dict(document.metadata)
    node = TextNode(
        id_=document.key, text=document.text, metadata=metadata, excluded_embed_metadata_keys=list(metadata)
    )
    return stored_nodes([node])[0]


def node_document(record: StoredNode) -> tuple[str, str, dict[str, Any]]:
    """A stored node as a document of a store of texts (its id, text and metadata), what a persist into a store
    folder writes (`document_node` reads it back). A node's relationships (its source document) are not part of a
    store of texts.

    Raises:
        ValueError: a node without text (an image node): a store of texts keeps texts.
    """
    node = json_to_doc(copy.deepcopy(record.node))
    if not isinstance(node, TextNode):
        raise ValueError(
            f"Node {record.key!r} is a {type(node).__name__}, not a text node: a store folder (store.json) keeps "
            "texts. Persist this store into another folder (index.storage_context.persist(other_dir))."
        )
    return record.key, node.text, dict(node.metadata)


def node_metadata(record: StoredNode) -> Mapping[str, Any]:
    """The metadata of a stored node (what filters see)."""
    return record.node[DATA_KEY].get("metadata") or {}


def node_text(record: StoredNode) -> str:
    """What the store's lexical side reads of a stored node: the text it was embedded from
    (`get_content(metadata_mode=MetadataMode.EMBED)`), as llama-index's BM25Retriever reads nodes."""
    return json_to_doc(copy.deepcopy(record.node)).get_content(metadata_mode=MetadataMode.EMBED)


def restored_node(record: StoredNode, best_window: Mapping[str, int] | None = None) -> BaseNode:
    """A new node object from a record (without its embedding); a multi-vector hit's `best_window` goes under
    `BEST_WINDOW_KEY` in its metadata (a span in `node.get_content()`), kept out of what embed models and LLMs see."""
    node = json_to_doc(copy.deepcopy(record.node))
    if best_window is not None:
        node.metadata[BEST_WINDOW_KEY] = dict(best_window)
        for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            if BEST_WINDOW_KEY not in excluded:
                excluded.append(BEST_WINDOW_KEY)
    return node


def hit_nodes(hits: Sequence[Any]) -> list[BaseNode]:
    """A new node for each hit of a search (the store's `StoreHit`s of `StoredNode`s), in order, each with its best
    window (`restored_node`)."""
    return [restored_node(hit.record, hit.best_window) for hit in hits]


def node_contents(nodes: list[BaseNode]) -> tuple[list[str], list[str]]:
    """What LlamaIndex embedded for each node (`get_content(metadata_mode=MetadataMode.EMBED)`: its text after its
    metadata lines), and the node's own text (`MetadataMode.NONE`), which a hit's window spans point into."""
    embedded = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    return embedded, [node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes]


def node_head(record: StoredNode) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """A node as a Qdrant head keeps it: the document every surface reads (its id, text and metadata; an image
    node's text empty), and beside it the node's own JSON and source document id (what LlamaIndex reads back,
    relationships and all)."""
    text = record.node[DATA_KEY].get("text") if record.node.get(TYPE_KEY) == TextNode.get_type() else None
    own = {"node": record.node, "doc_id": record.doc_id}
    return record.key, text if isinstance(text, str) else "", dict(node_metadata(record)), own


def head_node(key: str, text: str, metadata: dict[str, Any], own: Mapping[str, Any]) -> StoredNode:
    """The node of a Qdrant head: its own JSON when LlamaIndex wrote it (`node_head`), else a text node of the
    document's id, text and metadata (written by LangChain's store or the command line).

    Raises:
        ValueError: a head whose node is malformed.
    """
    if "node" not in own:
        return document_node(SimpleNamespace(key=key, text=text, metadata=metadata))
    node, doc_id = own["node"], own.get("doc_id")
    if not isinstance(node, dict) or not isinstance(doc_id, str):
        raise ValueError(f"the head of {key!r} holds a malformed node")
    return StoredNode(key, doc_id, node)

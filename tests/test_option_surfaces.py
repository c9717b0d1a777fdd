"""Every surface that takes the FairEmbedder options (FairEmbedder, the Ray EmbedderSpec, the LlamaIndex and
LangChain adapters, the command line) names them as `EmbedderOptions` does, defaults them to `DEFAULTS`, and refuses
a bad value with the error and message of `EmbedderOptions`, before any model is loaded."""

from __future__ import annotations

import argparse
import inspect
import re
from typing import Any, get_args

import pytest

from fair_retrieval import FairEmbedder, PositionalScaling
from fair_retrieval.cli.options import add_model_arguments, embedder_options
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.embedding.embedder_options import DEFAULTS, INSTANCE_DEFAULT, EmbedderOptions, Precision
from fair_retrieval.embedding.windows import LongDocuments
from fair_retrieval.engine.hook import Pooling

llama_fair = pytest.importorskip("llama_index.embeddings.fair")
langchain_fair = pytest.importorskip("langchain_fair")

MODEL = "org/not-loaded"  # every bad value must fail before a model is looked for

# What each surface leaves out of EmbedderOptions, and why (everything else it must take, under the same name).
LEFT_OUT: dict[str, set[str]] = {
    "FairEmbedder": set(),
    "EmbedderSpec": {"model_kwargs"},  # not shipped to Ray workers (refused with a TypeError)
    "FairEmbedding": {"positional_scaling"},  # the adapters expose no LPES
    "FairEmbeddings": {"positional_scaling"},
    "cli": {"calibration", "precision", "show_progress_bar", "model_kwargs", "positional_scaling"},  # own flags
}
LLAMA_NAMES = {"batch_size": "embed_batch_size"}  # LlamaIndex's own name for the batch size


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    return parser


def _cli_flag_names() -> set[str]:
    return {action.dest for action in _parser()._actions} - {"help", "model"}


def _int_flags() -> set[str]:
    return {action.dest for action in _parser()._actions if action.type is int}


def _build(surface: str, name: str, value: Any) -> None:
    """Give `name=value` to `surface` (no model is loaded: the value is refused first)."""
    if surface == "FairEmbedder":
        FairEmbedder(MODEL, **{name: value})
    elif surface == "EmbedderSpec":
        EmbedderSpec(MODEL, **{name: value})
    elif surface == "FairEmbedding":
        llama_fair.FairEmbedding(MODEL, **{LLAMA_NAMES.get(name, name): value})
    elif surface == "FairEmbeddings":
        langchain_fair.FairEmbeddings(model=MODEL, **{name: value})
    else:
        flag = "--" + name.replace("_", "-")
        embedder_options(_parser().parse_args([flag, str(value)]))


BAD_VALUES: list[tuple[str, Any, type[Exception], str]] = [
    (
        "pooling",
        "max",
        ValueError,
        "pooling must be one of ('cls', 'mean', 'last') (or None to use the model's), got 'max'.",
    ),
    ("max_length", 0, ValueError, "max_length must be a positive int or None, got 0."),
    ("max_length", True, ValueError, "max_length must be a positive int or None, got True."),
    ("max_length", 12.0, ValueError, "max_length must be a positive int or None, got 12.0."),
    ("batch_size", 0, ValueError, "batch_size must be a positive int, got 0."),
    ("batch_size", True, ValueError, "batch_size must be a positive int, got True."),
    ("precision", "fp16", ValueError, "precision must be 'auto', 'float32', 'float16' or 'bfloat16', got 'fp16'."),
    ("long_documents", "split", ValueError, "long_documents must be one of ('truncate', 'windows'), got 'split'."),
    ("window_overlap", -1, ValueError, "window_overlap must be an int ≥ 0 or None (an eighth of a window), got -1."),
    (
        "window_overlap",
        True,
        ValueError,
        "window_overlap must be an int ≥ 0 or None (an eighth of a window), got True.",
    ),
    ("device", 0, TypeError, "device must be a str, a torch.device or None, got int."),
    ("show_progress_bar", "yes", TypeError, "show_progress_bar must be a bool, got str."),
    ("model_kwargs", ["eager"], TypeError, "model_kwargs must be a dict or None, got list."),
    ("positional_scaling", (1.0,), TypeError, "positional_scaling must be a PositionalScaling or None, got tuple."),
]
SURFACES = list(LEFT_OUT)


def _cases() -> list[Any]:
    cases = []
    for surface in SURFACES:
        for name, value, error, message in BAD_VALUES:
            if name in LEFT_OUT[surface]:
                continue
            if surface == "cli" and (name not in _int_flags() or type(value) is not int):
                continue  # a flag's value is text: what reaches EmbedderOptions is an int from type=int, or a str
            cases.append(pytest.param(surface, name, value, error, message, id=f"{surface}-{name}={value!r}"))
    return cases


@pytest.mark.parametrize(("surface", "name", "value", "error", "message"), _cases())
def test_every_surface_refuses_a_bad_value_with_the_options_message(
    surface: str, name: str, value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        EmbedderOptions(**{name: value})  # the one place that words it
    with pytest.raises(error, match=re.escape(message)):
        _build(surface, name, value)


def _accepted_defaults(surface: str) -> dict[str, Any]:
    """The option names `surface` takes (in EmbedderOptions' spelling) with the default it gives each."""
    if surface == "FairEmbedder":
        parameters = inspect.signature(FairEmbedder.__init__).parameters
        return {name: p.default for name, p in parameters.items() if name not in ("self", "model")}
    if surface == "EmbedderSpec":
        options = EmbedderSpec(MODEL).options()
        return {name: getattr(options, name) for name in EmbedderOptions.names() if name not in LEFT_OUT[surface]}
    if surface == "FairEmbedding":
        # Every option parameter defaults to "not given" (INSTANCE_DEFAULT); the field it fills has the default.
        spelled = {value: key for key, value in LLAMA_NAMES.items()}
        parameters = inspect.signature(llama_fair.FairEmbedding.__init__).parameters
        fields = llama_fair.FairEmbedding.model_fields
        found = {}
        for name, parameter in parameters.items():
            option = spelled.get(name, name)
            if option in EmbedderOptions.names():
                assert parameter.default is INSTANCE_DEFAULT, name
                found[option] = fields[name].default if name in fields else getattr(DEFAULTS, option)
        return found
    if surface == "FairEmbeddings":
        model_fields = langchain_fair.FairEmbeddings.model_fields
        return {name: f.default for name, f in model_fields.items() if name in EmbedderOptions.names()}
    defaults = vars(_parser().parse_args([]))
    return {
        name: defaults[name] if defaults[name] is not None else getattr(DEFAULTS, name) for name in _cli_flag_names()
    }


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_takes_the_option_names_with_their_defaults(surface: str) -> None:
    accepted = _accepted_defaults(surface)
    assert set(accepted) == set(EmbedderOptions.names()) - LEFT_OUT[surface]
    assert accepted == {name: getattr(DEFAULTS, name) for name in accepted}


def test_what_a_surface_leaves_out_it_refuses_or_lacks() -> None:
    with pytest.raises(TypeError, match="does not forward model_kwargs to Ray workers"):
        EmbedderSpec(MODEL, model_kwargs={"attn_implementation": "eager"})
    with pytest.raises(ValueError, match="unknown option 'positional_scaling'"):
        llama_fair.FairEmbedding(MODEL, positional_scaling=PositionalScaling(factors=(1.0,)))
    with pytest.raises(ValueError, match="unknown option 'positional_scaling'"):
        langchain_fair.FairEmbeddings(model=MODEL, positional_scaling=PositionalScaling(factors=(1.0,)))


@pytest.mark.parametrize(("flag", "literal"), [("--pooling", Pooling), ("--long-documents", LongDocuments)])
def test_the_cli_offers_the_literal_values_as_choices(flag: str, literal: Any) -> None:
    (action,) = [a for a in _parser()._actions if flag in a.option_strings]
    assert tuple(action.choices) == get_args(literal)
    with pytest.raises(SystemExit):
        _parser().parse_args([flag, "no-such-value"])


@pytest.mark.parametrize(
    ("name", "literal"), [("pooling", Pooling), ("precision", Precision), ("long_documents", LongDocuments)]
)
def test_the_literal_options_allow_exactly_their_literal_values(name: str, literal: Any) -> None:
    for value in get_args(literal):
        assert getattr(EmbedderOptions(**{name: value}), name) == value
    for value in (get_args(literal)[0].upper(), True):
        with pytest.raises(ValueError, match=f"{name} must be"):
            EmbedderOptions(**{name: value})


def test_each_option_is_documented_once_where_it_is_declared() -> None:
    """`EmbedderOptions` documents every field, in order; `option_doc` gives that text, and refuses other names."""
    from fair_retrieval.adapters import option_doc
    from fair_retrieval.embedding.embedder_options import LOADING_OPTIONS

    for name in EmbedderOptions.names():
        text = option_doc(name)
        assert text and "\n" not in text and "  " not in text, name
        noted = option_doc(name, loading_note=True)
        assert (noted != text) == (name in LOADING_OPTIONS), name
    assert "an eighth of a window" in option_doc("window_overlap")
    with pytest.raises(ValueError, match="not a FairEmbedder option"):
        option_doc("max_tokens")


@pytest.mark.parametrize("surface", ["FairEmbedding", "FairEmbeddings"])
def test_the_adapters_fields_describe_the_options_with_their_declaration(surface: str) -> None:
    """The adapters' pydantic fields carry the declared text (generated from it), never a text of their own."""
    from fair_retrieval.adapters import option_doc

    cls = llama_fair.FairEmbedding if surface == "FairEmbedding" else langchain_fair.FairEmbeddings
    fields = cls.model_fields
    described = [name for name in EmbedderOptions.names() if name in fields]
    assert len(described) >= 8
    for name in described:
        assert fields[name].description is not None
        assert fields[name].description.startswith(option_doc(name)), (surface, name)


def test_the_options_documentation_is_data_that_survives_without_docstrings() -> None:
    """`python -OO` strips docstrings; the options' documentation is declared as data, so the adapters' fields and
    the CLI help keep it."""
    import subprocess
    import sys

    from fair_retrieval.adapters import option_doc

    code = (
        "import langchain_fair, llama_index.embeddings.fair\n"
        "from fair_retrieval.adapters import option_doc\n"
        "print(option_doc('pooling'))\n"
        "print(llama_index.embeddings.fair.FairEmbedding.model_fields['pooling'].description)"
    )
    done = subprocess.run([sys.executable, "-OO", "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [option_doc("pooling"), option_doc("pooling", loading_note=True)]


def test_the_cli_help_comes_from_the_declaration() -> None:
    from fair_retrieval.embedding.embedder_options import option_help

    helps = {action.dest: action.help for action in _parser()._actions}
    for name in _cli_flag_names():
        assert helps[name] == option_help(name), name
    assert option_help("window_overlap").endswith("(default: an eighth of a window)")
    assert option_help("batch_size").endswith(f"(default: {DEFAULTS.batch_size})")


# ------------------------------------------------------------------------- one rule for "given", in both adapters


@pytest.fixture(scope="module")
def shared(tiny_models: dict[str, str]) -> FairEmbedder:
    from fair_retrieval import Calibration

    return FairEmbedder(tiny_models["bert-mean"], device="cpu", calibration=Calibration(strength=0.5, basket_size=4))


def _adapter(surface: str, **keywords: Any) -> Any:
    if surface == "FairEmbedding":
        return llama_fair.FairEmbedding(**keywords)
    return langchain_fair.FairEmbeddings(**keywords)


@pytest.mark.parametrize("surface", ["FairEmbedding", "FairEmbeddings"])
@pytest.mark.parametrize(("name", "value"), [("max_length", None), ("pooling", None), ("precision", "auto")])
def test_a_loading_option_passed_with_a_ready_embedder_is_refused_even_at_its_default(
    shared: FairEmbedder, surface: str, name: str, value: Any
) -> None:
    """An option counts as given when its keyword is passed, in both adapters (LlamaIndex used to decide by value,
    so the same arguments passed there and failed in LangChain)."""
    with pytest.raises(ValueError, match=f"{name} configure"):
        _adapter(surface, embedder=shared, **{name: value})


@pytest.mark.parametrize("surface", ["FairEmbedding", "FairEmbeddings"])
def test_the_calibration_goes_down_once_and_calls_use_it(shared: FairEmbedder, surface: str) -> None:
    """A calibration given with a ready embedder is handed to it once (a view sharing the loaded model); the
    adapter's calls pass none, and its own default stays the embedder's."""
    import numpy as np

    from fair_retrieval import Calibration

    texts = ["one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"]
    plain = _adapter(surface, embedder=shared, calibration=None)
    inner = plain.embedder if surface == "FairEmbedding" else plain.fair_embedder
    assert inner.calibration is None and inner.model is shared.model and shared.calibration is not None
    own = _adapter(surface, embedder=shared)
    assert own.calibration == shared.calibration
    embed = "get_text_embedding_batch" if surface == "FairEmbedding" else "embed_documents"
    np.testing.assert_allclose(getattr(plain, embed)(texts), shared.embed_documents(texts, calibration=None), atol=1e-6)
    np.testing.assert_allclose(getattr(own, embed)(texts), shared.embed_documents(texts), atol=1e-6)
    own.calibration = None  # set later: handed down again
    np.testing.assert_allclose(getattr(own, embed)(texts), shared.embed_documents(texts, calibration=None), atol=1e-6)
    own.calibration = Calibration(strength=0.5, basket_size=4).to_dict()  # the dict form, as to_dict() writes it
    assert own.calibration == shared.calibration

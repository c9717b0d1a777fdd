"""The shared options: calibration flags override a --config file, --no-calibration gives None; the model flags
(--long-documents, --window-overlap, …) reach `EmbedderOptions` and the Ray spec, library defaults when not given."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fair_retrieval import Calibration
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_model_arguments,
    calibration_from_args,
    embedder_options,
    parse_bool,
)
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.embedding.embedder_options import EmbedderOptions


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_calibration_arguments(parser)
    return parser.parse_args(argv)


def test_flags_override_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    Calibration(strength=0.75, basket_size=64).save(path)
    cal = calibration_from_args(_parse(["--config", str(path), "--special-tokens", "preserve", "--layers", "4,5"]))
    assert cal == Calibration(strength=0.75, basket_size=64, layers=(4, 5), special_tokens="preserve")


def test_defaults_and_no_calibration() -> None:
    assert calibration_from_args(_parse([])) == Calibration()
    assert calibration_from_args(_parse(["--no-calibration"])) is None


def test_every_calibration_field_has_a_flag() -> None:
    argv = ["--strength", "0.6", "--basket-size", "96", "--layers", "2", "--isolated", "equal"]
    argv += ["--partial-basket", "proportional", "--special-tokens", "preserve", "--min-full-baskets", "3"]
    argv += ["--strength-ramp", "64"]
    cal = calibration_from_args(_parse(argv))
    expected = Calibration(0.6, 96, 2, "equal", "proportional", "preserve", 3, 64)
    assert cal == expected
    assert set(cal.to_dict()) == {
        f.replace("-", "_")
        for f in (
            "strength",
            "basket_size",
            "layers",
            "isolated",
            "partial_basket",
            "special_tokens",
            "min_full_baskets",
            "strength_ramp",
        )
    }


def _parse_model(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    return parser.parse_args(argv)


def test_long_document_flags_default_to_the_library() -> None:
    args = _parse_model([])
    assert (args.long_documents, args.window_overlap) == (None, None)
    assert embedder_options(args) == EmbedderOptions()
    bare = argparse.Namespace(pooling=None, max_length=None, batch_size=32, device=None)  # a command without them
    assert embedder_options(bare) == EmbedderOptions()


def test_long_document_flags_reach_the_options_and_the_ray_spec() -> None:
    args = _parse_model(["--long-documents", "truncate", "--window-overlap", "16", "--max-length", "128"])
    options = embedder_options(args, calibration=None)
    assert (options.long_documents, options.window_overlap, options.max_length) == ("truncate", 16, 128)
    spec = EmbedderSpec.from_options("org/some-model", options)
    assert spec.options() == options
    assert (spec.fingerprint()["long_documents"], spec.fingerprint()["window_overlap"]) == ("truncate", 16)
    assert EmbedderSpec("org/some-model").options() == EmbedderOptions()  # the spec's defaults are the options'
    with pytest.raises(TypeError, match="model_kwargs"):
        EmbedderSpec.from_options("org/some-model", EmbedderOptions(model_kwargs={"attn_implementation": "sdpa"}))


def test_bad_long_document_flags_are_refused() -> None:
    with pytest.raises(SystemExit):
        _parse_model(["--long-documents", "split"])
    with pytest.raises(ValueError, match=r"must be an int ≥ 0 or None \(an eighth of a window\), got -1"):
        embedder_options(_parse_model(["--window-overlap", "-1"]))


def test_parse_bool_reads_true_and_false_and_refuses_the_rest() -> None:
    assert [parse_bool(text) for text in ("true", "Yes", "1", "on", "FALSE", "no", "0", "off")] == [True] * 4 + [
        False
    ] * 4
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false"):
        parse_bool("maybe")

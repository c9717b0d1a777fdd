"""The shared calibration options: flags override a --config file, --no-calibration gives None."""

from __future__ import annotations

import argparse
from pathlib import Path

from fair_retrieval import Calibration
from fair_retrieval.cli.options import add_calibration_arguments, calibration_from_args


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
    cal = calibration_from_args(_parse(argv))
    expected = Calibration(0.6, 96, 2, "equal", "proportional", "preserve", 3)
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
        )
    }

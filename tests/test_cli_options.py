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

"""Settings recorded under a key only when not the defaults, and read back checked."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from fair_retrieval.jsonio.recorded_settings import recorded_settings, settings_record


@dataclass(frozen=True)
class Knobs:
    size: int = 3
    name: str = "a"

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"size must be a positive int, got {self.size!r}.")


def test_the_defaults_record_nothing_and_read_back_as_the_defaults() -> None:
    assert settings_record(Knobs(), "knobs") == {}
    assert recorded_settings(Knobs, {}, "knobs", "knobs", "f.json") == Knobs()
    assert recorded_settings(Knobs, {"knobs": None}, "knobs", "knobs", "f.json") == Knobs()


def test_other_settings_round_trip_through_json() -> None:
    record = json.loads(json.dumps(settings_record(Knobs(size=7, name="b"), "knobs")))
    assert record == {"knobs": {"size": 7, "name": "b"}}
    assert recorded_settings(Knobs, record, "knobs", "knobs", "f.json") == Knobs(size=7, name="b")


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ([1, 2], "malformed knobs"),
        ({"size": 2, "colour": "red"}, "malformed knobs"),
        ({"size": 0}, "knobs this release cannot use: size must be"),
        ({"size": "2"}, "knobs this release cannot use"),
    ],
)
def test_damaged_settings_are_refused_naming_the_file(raw: object, words: str) -> None:
    with pytest.raises(ValueError, match=f"^f.json records {words}"):
        recorded_settings(Knobs, {"knobs": raw}, "knobs", "knobs", "f.json")

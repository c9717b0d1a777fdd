"""Inputs of the speed benchmarks (calibration_speed.py, window_speed.py): long prose passages, from the Python docs
shipped with Python, so that no data is needed."""

from __future__ import annotations


def long_texts(count: int, tokens: int, tokenizer: object) -> list[str]:
    """`count` distinct prose passages of at least `tokens` tokens, cut from the Python docs shipped with Python."""
    from pydoc_data.topics import topics

    prose = " ".join(" ".join(topics[key].split()) for key in sorted(topics))
    words = prose.split()
    texts, start = [], 0
    step = int(tokens * 0.9)
    while len(texts) < count:
        chunk = words[start : start + step]
        text = " ".join(chunk)
        while len(tokenizer(text)["input_ids"]) < tokens:  # type: ignore[operator]
            chunk = words[start : start + len(chunk) + 20]
            text = " ".join(chunk)
        texts.append(text)
        start = (start + len(chunk)) % max(1, len(words) - 4 * tokens)
    return texts

"""`fair-retrieval index` and `search` end to end with the real MiniLM, in process; plus a `--help` smoke test."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")

from fair_retrieval import Calibration, FairEmbedder, FaissIndex
from fair_retrieval.cli import main
from fair_retrieval.cli.cmd_search import snippet
from fair_retrieval.inputs import read_documents

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

DOCS: list[dict[str, Any]] = [
    {"id": "volcano", "text": "Volcanoes erupt when magma rises through the crust and escapes as lava, ash and gas."},
    {"id": 7, "text": "To bake bread, mix flour, water, yeast and salt, knead the dough, let it rise.", "lang": "en"},
    {"text": "The stock market fell sharply after the central bank raised interest rates.", "metadata": {"t": "fin"}},
    {"id": "penguin", "text": "Penguins are flightless seabirds that live almost only in the Southern Hemisphere."},
    {  # longer than one 128-token basket, so calibration changes its vector
        "id": "lighthouse",
        "text": " ".join(
            f"Lighthouse keeper log, day {day}: the lamp was trimmed, the lens polished and the fog bell tested."
            for day in range(1, 9)
        ),
    },
]


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread() -> Any:
    """A few vectors: OpenMP threads only add contention on a busy runner."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


# These documents are a few dozen tokens long; the default calibration (≥ 384 content tokens) would leave them plain.
SHORT_TEXTS = Calibration(basket_size=16, min_full_baskets=1)


@pytest.fixture(scope="module")
def jsonl_index(tmp_path_factory: pytest.TempPathFactory, minilm: str) -> Path:
    folder = tmp_path_factory.mktemp("jsonl")
    source = folder / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d) for d in DOCS[:2]) + "\n\n" + "\n".join(json.dumps(d) for d in DOCS[2:]))
    output = folder / "index"
    flags = ["--basket-size", str(SHORT_TEXTS.basket_size), "--min-full-baskets", str(SHORT_TEXTS.min_full_baskets)]
    assert main([*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), *flags]) == 0
    return output


def search_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    capsys.readouterr()
    assert main(["search", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["results"]  # type: ignore[no-any-return]


def test_index_writes_documents_manifest_and_calibrated_vectors(jsonl_index: Path, minilm: str) -> None:
    assert sorted(p.name for p in jsonl_index.iterdir()) == [
        "documents.jsonl",
        "index.faiss",
        "index.json",
        "manifest.json",
    ]
    manifest = json.loads((jsonl_index / "manifest.json").read_text())
    assert manifest["model"] == str(Path(minilm).resolve())
    assert (manifest["pooling"], manifest["max_length"], manifest["dim"], manifest["count"]) == ("mean", 256, 384, 5)
    assert manifest["calibration"] == SHORT_TEXTS.to_dict() and manifest["kind"] == "flat"
    assert (manifest["long_documents"], manifest["window_overlap"], manifest["chunking"]) == ("windows", 32, None)
    rows = [json.loads(line) for line in (jsonl_index / "documents.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["volcano", "7", "line-4", "penguin", "lighthouse"]  # line 3 is blank
    assert rows[1]["metadata"] == {"lang": "en"} and rows[2]["metadata"] == {"t": "fin"}
    # the stored vectors are the calibrated document embeddings, in documents.jsonl order
    index = FaissIndex.load(jsonl_index, gpu=False)
    np.testing.assert_array_equal(index.ids, np.arange(5))
    expected = FairEmbedder(minilm, calibration=SHORT_TEXTS).embed_documents([d["text"] for d in DOCS])
    np.testing.assert_allclose(index.get_vectors(np.arange(5)), expected, atol=1e-5)
    plain = FairEmbedder(minilm).embed_documents([d["text"] for d in DOCS], calibration=None)
    assert np.abs(index.get_vectors([4])[0] - plain[4]).max() > 1e-4  # calibration was applied (λ 0.05: ~1e-3)


def test_search_ranks_the_relevant_document_first(jsonl_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = search_json(capsys, "--index", str(jsonl_index), "--query", "how is bread made", "-k", "10")
    assert results[0]["id"] == "7"
    assert len(results) == 5 and [r["rank"] for r in results] == [1, 2, 3, 4, 5]
    assert results[0]["score"] >= results[1]["score"] >= results[4]["score"]
    assert results[0]["metadata"] == {"lang": "en"} and results[0]["text"] == DOCS[1]["text"]
    assert search_json(capsys, "--index", str(jsonl_index), "--query", "birds of Antarctica", "-k", "1")[0]["id"] == (
        "penguin"
    )
    # text output: rank, score, id, snippet on one line
    assert main(["search", "--index", str(jsonl_index), "--query", "lava and magma", "-k", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    fields = lines[0].split()
    assert len(lines) == 2 and fields[0] == "1." and float(fields[1]) > 0 and fields[2] == "volcano"
    assert "Volcanoes erupt" in lines[0]


def test_index_a_folder_uncalibrated_with_ivf(tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "animals").mkdir(parents=True)
    (docs / "animals" / "penguin.md").write_text("# Penguins\n\n" + DOCS[3]["text"])
    (docs / "volcano.txt").write_text(DOCS[0]["text"])
    (docs / "bread.TXT").write_text(DOCS[1]["text"])
    (docs / "notes.csv").write_text("ignored")
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "x.txt").write_text("ignored too")
    output = tmp_path / "index"
    args = [*INDEX, "--model", minilm, "--input", str(docs), "--output", str(output), "--no-calibration"]
    assert main([*args, "--kind", "ivf", "--index-param", "nlist=2", "--index-param", "nprobe=2"]) == 0
    out = capsys.readouterr().out
    assert "Indexed 3 documents (384-d vectors, ivf index)" in out
    assert "Embedded 3 documents: 0 windowed, 0 truncated, none calibrated (--no-calibration)" in out
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["calibration"] is None and manifest["kind"] == "ivf" and manifest["params"]["nlist"] == 2
    results = search_json(capsys, "--index", str(output), "--query", "seabirds that cannot fly", "-k", "3")
    assert results[0]["id"] == "animals/penguin.md"
    assert {r["id"] for r in results} == {"animals/penguin.md", "volcano.txt", "bread.TXT"}
    # an existing index is not overwritten by accident
    capsys.readouterr()
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "fine"}\n{"text": "broken"\n', "line 2: not valid JSON"),
        ('{"text": "fine"}\n\n["a list"]\n', "line 3: expected a JSON object"),
        ('{"body": "x"}\n', "line 1: no 'text' field"),
        ('{"text": 5}\n', "line 1: 'text' must be a string"),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "line 2: id 'a' was already used on line 1"),
        ('{"id": [1], "text": "x"}\n', "'id' must be a string or an integer"),
        ("\n\n", "no documents"),
    ],
)
def test_bad_jsonl_exits_2_with_the_line(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(content)
    code = main([*INDEX, "--model", minilm, "--input", str(source), "--output", str(tmp_path / "out")])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_text_and_id_fields_are_configurable(tmp_path: Path) -> None:
    source = tmp_path / "d.jsonl"
    source.write_text('{"key": "k1", "body": "hello", "extra": 1}\n')
    [doc] = read_documents(source, text_field="body", id_field="key")
    assert (doc.id, doc.text, doc.metadata) == ("k1", "hello", {"extra": 1})


def test_other_cli_errors_exit_2(tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "d.jsonl"
    source.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    out = str(tmp_path / "out")
    base = [*INDEX, "--model", minilm, "--input", str(source), "--output", out]
    assert main([*base, "--kind", "ivf"]) == 2  # default nlist=100 needs 100 documents
    assert "at least 100" in capsys.readouterr().err
    assert main([*base, "--index-param", "nlist"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main([*INDEX, "--model", minilm, "--input", str(tmp_path / "missing"), "--output", out]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["search", "--index", str(tmp_path), "--query", "x"]) == 2
    assert "is not a fair-retrieval store folder (no store.json) nor an index folder" in capsys.readouterr().err


def test_snippet_is_one_short_line() -> None:
    assert snippet("a\n\nb   c") == "a b c"
    long = snippet("word " * 100, limit=20)
    assert len(long) == 20 and long.endswith("…") and "\n" not in long


def test_module_help_smoke() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fair_retrieval", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "index" in result.stdout and "search" in result.stdout


def test_skipped_files_are_reported(tmp_path: Path, minilm: str, caplog: pytest.LogCaptureFixture) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(DOCS[0]["text"])
    for name in ("b.pdf", "c.pdf", "d.html", "README"):
        (docs / name).write_text("not indexed")
    output = tmp_path / "index"
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.inputs"):
        assert main([*INDEX, "--model", minilm, "--input", str(docs), "--output", str(output)]) == 0
    [record] = [r for r in caplog.records if r.name == "fair_retrieval.inputs"]
    message = record.getMessage()
    assert "Skipped 4 files" in message and ".pdf (2)" in message and ".html (1)" in message
    assert "(no extension) (1)" in message


def test_one_document_is_singular_and_default_model_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fair_retrieval.embedding import loading

    monkeypatch.setattr(loading, "hub_model_reachable", lambda repo_id: False)  # offline: the bundled copy
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps(DOCS[0]) + "\n")
    output = tmp_path / "index"
    assert main([*INDEX, "--input", str(source), "--output", str(output)]) == 0  # no --model: the default
    out = capsys.readouterr().out  # a short text: the default calibration (≥ 384 content tokens) leaves it plain
    assert "Indexed 1 document (384-d vectors, flat index)" in out
    assert "Embedded 1 document: 0 windowed, 0 truncated, 0 calibrated, 1 plain (fewer than the 384 content" in out
    assert json.loads((output / "manifest.json").read_text())["model"] == loading.DEFAULT_MODEL
    assert search_json(capsys, "--index", str(output), "--query", "lava")[0]["id"] == "volcano"


def test_output_inside_input_is_refused(tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("text")
    for output in (docs / "index", docs):
        assert main([*INDEX, "--model", minilm, "--input", str(docs), "--output", str(output), "--overwrite"]) == 2
        assert "inside --input" in capsys.readouterr().err
    assert sorted(p.name for p in docs.iterdir()) == ["a.txt"]


def test_search_errors_are_clear(jsonl_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for query in ("", "   \n"):
        assert main(["search", "--index", str(jsonl_index), "--query", query]) == 2
        assert "--query is empty" in capsys.readouterr().err
    assert main(["search", "--index", str(tmp_path / "nowhere"), "--query", "x"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_ctrl_c_exits_130_and_leaves_the_previous_index_whole(
    jsonl_index: Path, tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    output = tmp_path / "index"
    shutil.copytree(jsonl_index, output)
    before = {p.name: p.read_bytes() for p in output.iterdir()}

    def interrupted(self: FaissIndex, folder: Any) -> None:
        (Path(folder) / "index.faiss").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(FaissIndex, "save", interrupted)
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps(DOCS[0]) + "\n")
    args = [*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), "--overwrite"]
    assert main(args) == 130
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == "fair-retrieval index: interrupted"  # after progress bars
    assert "Traceback" not in captured.err
    assert {p.name: p.read_bytes() for p in output.iterdir()} == before  # nothing half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "index"]  # no staging folder left
    fresh = tmp_path / "fresh"
    assert main([*INDEX, "--model", minilm, "--input", str(source), "--output", str(fresh)]) == 130
    assert not fresh.exists()


def test_ctrl_c_before_a_command_starts_is_one_line_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fair_retrieval.cli as cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["search", "--index", "x", "--query", "y"]) == 130
    assert capsys.readouterr().err == "fair-retrieval: interrupted\n"


# ---------------------------------------------------------------------------------------------- long documents

LOG = (
    " ".join(  # about 750 MiniLM tokens: three windows of 256, or a dozen chunks of 64
        f"Lighthouse keeper log, day {day}: the lamp was trimmed, the lens polished and the fog bell tested."
        for day in range(1, 31)
    )
    + " On the last evening a humpback whale surfaced beside the rocks and sang until dawn."
)
BREAD = "\n\n".join(
    f"Step {step}. {DOCS[1]['text']} Bake it at {180 + step} degrees until the crust sounds hollow."
    for step in range(6)
)


def test_index_chunks_long_files_and_search_gives_their_offsets(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    from fair_retrieval.cli.chunking import chunk_documents
    from fair_retrieval.embedding.windows import chunk_plan
    from fair_retrieval.inputs import read_documents

    docs = tmp_path / "docs"
    (docs / "kitchen").mkdir(parents=True)
    (docs / "log.txt").write_text(LOG)
    (docs / "kitchen" / "bread.md").write_text(BREAD)
    (docs / "penguin.txt").write_text(DOCS[3]["text"])
    output = tmp_path / "index"
    flags = ["--basket-size", "16", "--min-full-baskets", "1"]
    capsys.readouterr()
    assert (
        main([*INDEX, "--model", minilm, "--input", str(docs), "--output", str(output), "--chunk-tokens", "64", *flags])
        == 0
    )
    out = capsys.readouterr().out
    manifest = json.loads((output / "manifest.json").read_text())
    # the default overlap is chunk_plan's (an eighth); the rows are the library's chunks, in order
    overlap = chunk_plan(254, 64)[1]
    assert manifest["chunking"] == {"chunk_tokens": 64, "chunk_overlap": overlap, "documents": 3} and overlap == 8
    sources = {str(d.id): d.text for d in read_documents(docs)}
    expected = chunk_documents(read_documents(docs), AutoTokenizer.from_pretrained(minilm), 64, overlap)
    rows = [json.loads(line) for line in (output / "documents.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == [chunk.id for chunk in expected] and manifest["count"] == len(rows)
    assert {row["id"].rsplit("#", 1)[0] for row in rows} == {"log.txt", "kitchen/bread.md", "penguin.txt"}
    assert "penguin.txt#0" in [row["id"] for row in rows] and "penguin.txt#1" not in [row["id"] for row in rows]
    for row in rows:
        source, k = row["id"].rsplit("#", 1)
        meta = row["metadata"]
        assert (meta["source_id"], meta["chunk"]) == (source, int(k))
        assert sources[source][meta["start_char"] : meta["end_char"]] == row["text"]
    assert sum(row["id"].startswith("log.txt#") for row in rows) >= 12  # the long file really became chunks
    # every chunk fits one window; the penguin's one chunk (15 tokens) is too short for this calibration
    embedder = FairEmbedder(minilm, calibration=SHORT_TEXTS)
    calibrated = sum(embedder.calibrated_texts([row["text"] for row in rows], SHORT_TEXTS))
    assert calibrated == len(rows) - 1
    assert f"Indexed {len(rows)} chunks of 3 documents (384-d vectors, flat index) into {output}" in out
    assert f"Embedded {len(rows)} chunks: 0 windowed, 0 truncated, {calibrated} calibrated, 1 plain (fewer" in out
    # vector i is chunk i, calibrated
    index = FaissIndex.load(output, gpu=False)
    last = len(rows) - 1
    embedded = embedder.embed_documents([rows[0]["text"], rows[last]["text"]])
    np.testing.assert_allclose(index.get_vectors([0, last]), embedded, atol=1e-5)

    query = ["--index", str(output), "--query", "a whale surfaced beside the rocks"]
    [best] = search_json(capsys, *query, "-k", "1")
    log_chunks = [row for row in rows if row["id"].startswith("log.txt#")]
    assert best["id"] == log_chunks[-1]["id"] and "whale" in best["text"]
    assert (best["metadata"]["end_char"], best["metadata"]["source_id"]) == (len(LOG), "log.txt")
    assert main(["search", *query, "-k", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    meta = best["metadata"]
    assert lines[0].split()[2:4] == [best["id"], f"[{meta['start_char']}:{meta['end_char']}]"]
    assert len(lines) == 2 and "[" in lines[1].split()[3]


def test_printed_counts_say_what_was_windowed_truncated_and_calibrated(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = [LOG, DOCS[0]["text"], "Short note."]  # windowed, calibrated; calibrated; too short to calibrate
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(texts)) + "\n")
    output = tmp_path / "index"
    base = [*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), "--overwrite"]
    flags = ["--basket-size", "16", "--min-full-baskets", "1"]
    windows = len(FairEmbedder(minilm, window_overlap=8).plan_documents([LOG]).pieces)
    plain_embedder = FairEmbedder(minilm)
    windows_without_overlap = len(plain_embedder.plan_documents([LOG]).pieces)
    assert windows >= windows_without_overlap >= 3  # about 750 tokens in windows of 254

    capsys.readouterr()
    assert main([*base, *flags, "--window-overlap", "8"]) == 0
    out = capsys.readouterr().out
    plain = "1 plain (fewer than the 16 content tokens the calibration needs)"
    assert f"Embedded 3 documents: 1 windowed ({windows} windows), 0 truncated, 2 calibrated, {plain}" in out
    manifest = json.loads((output / "manifest.json").read_text())
    assert (manifest["long_documents"], manifest["window_overlap"]) == ("windows", 8)
    assert search_json(capsys, "--index", str(output), "--query", "the lighthouse keeper", "-k", "1")[0]["id"] == "0"

    assert main([*base, *flags, "--long-documents", "truncate"]) == 0
    out = capsys.readouterr().out
    lengths = plain_embedder.token_lengths(texts)
    share = (lengths[0] - 256) / sum(lengths)
    assert (
        f"Embedded 3 documents: 0 windowed, 1 truncated ({share:.0%} of all tokens never embedded), 2 calibrated" in out
    )
    manifest = json.loads((output / "manifest.json").read_text())
    assert (manifest["long_documents"], manifest["window_overlap"]) == ("truncate", 32)

    assert main([*base, "--no-calibration"]) == 0
    out = capsys.readouterr().out
    counts = f"1 windowed ({windows_without_overlap} windows), 0 truncated, none calibrated (--no-calibration)"
    assert f"Embedded 3 documents: {counts}" in out


def test_search_loads_manifests_from_before_windows_as_truncating(
    jsonl_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from fair_retrieval.cli.index_folder import query_embedder_options
    from fair_retrieval.embedding.embedder_options import EmbedderOptions

    old = tmp_path / "old-index"
    shutil.copytree(jsonl_index, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for key in ("long_documents", "window_overlap", "chunking"):
        del manifest[key]
    (old / "manifest.json").write_text(json.dumps(manifest))
    import zlib

    from fair_retrieval.jsonio.snapshot import record_crc32

    record = json.loads((old / "index.json").read_text())  # recorded again, as a save of that manifest would
    raw = (old / "manifest.json").read_bytes()
    record["publication"]["files"]["manifest.json"] = {"bytes": len(raw), "crc32": zlib.crc32(raw)}
    record["publication"]["record_crc32"] = record_crc32(record)
    (old / "index.json").write_text(json.dumps(record))
    options = query_embedder_options(manifest)
    assert (options.long_documents, options.window_overlap, options.calibration) == ("truncate", 0, None)
    assert (options.pooling, options.max_length) == ("mean", 256)

    import fair_retrieval.cli.cmd_search as cmd_search

    built: list[EmbedderOptions] = []
    build = cmd_search.build_embedder

    def spy(options: EmbedderOptions, model: Any) -> FairEmbedder:
        built.append(options)
        return build(options, model)

    monkeypatch.setattr(cmd_search, "build_embedder", spy)
    new = search_json(capsys, "--index", str(jsonl_index), "--query", "how is bread made", "-k", "3")
    assert search_json(capsys, "--index", str(old), "--query", "how is bread made", "-k", "3") == new
    assert [o.long_documents for o in built] == ["windows", "truncate"]
    assert main(["search", "--index", str(old), "--query", "lava", "-k", "1"]) == 0
    assert "[" not in capsys.readouterr().out  # no chunk offsets in an index of whole documents


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--chunk-overlap", "4"], "--chunk-overlap needs --chunk-tokens N"),
        (["--chunk-tokens", "0"], "chunk size must be a positive number of tokens, got 0"),
        (["--chunk-tokens", "64", "--chunk-overlap", "64"], r"chunk overlap must be an int in [0, 64) tokens, got 64"),
        (["--window-overlap", "-1"], "window_overlap must be an int ≥ 0"),
        (["--engine", "ray", "--chunk-tokens", "64"], "--chunk-tokens works with --engine local"),
        (["--engine", "ray", "--long-documents", "truncate"], "--engine ray embeds long documents as the default"),
    ],
)
def test_bad_long_document_flags_exit_2_before_loading_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str], message: str
) -> None:
    import fair_retrieval.cli.cmd_index as cmd_index
    from fair_retrieval.embedding.embedder_options import EmbedderOptions

    def never(options: EmbedderOptions, model: Any) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(cmd_index, "build_embedder", never)
    source = tmp_path / "d.jsonl"
    source.write_text(json.dumps(DOCS[0]) + "\n")
    assert main([*INDEX, "--input", str(source), "--output", str(tmp_path / "out"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_index_multivector_keeps_windows_and_search_shows_the_best_window(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    filler = " ".join(f"Harbour log, day {day}: ferries came and went, the quay was swept." for day in range(1, 60))
    needle = "The old lighthouse keeper hid the brass key under the third step of the spiral staircase."
    source = tmp_path / "docs.jsonl"
    rows = [{"id": "long", "text": f"{filler} {needle} {filler}"}, *DOCS[:3]]
    source.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    output = tmp_path / "mv"
    args = [*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), "--no-calibration"]
    assert main([*args, "--multivector", "--aggregate", "top2"]) == 0
    assert "window vectors" in capsys.readouterr().out
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["multivector"] == {"aggregate": "top2"} and (output / "windows.json").is_file()
    with pytest.raises(ValueError, match="MultiVectorIndex"):
        FaissIndex.load(output, gpu=False)
    results = search_json(capsys, "--index", str(output), "--query", "where is the brass key hidden", "-k", "10")
    assert [r["rank"] for r in results] == [1, 2, 3, 4] and len({r["id"] for r in results}) == 4
    best = results[0]["best_window"]
    assert results[0]["id"] == "long" and best["window"] >= 1
    assert needle in rows[0]["text"][best["start"] : best["end"]]  # type: ignore[index]
    assert main(["search", "--index", str(output), "--query", "where is the brass key hidden", "-k", "1"]) == 0
    line = capsys.readouterr().out
    assert f"best window [{best['start']}:{best['end']}]" in line
    # a pooled index of the same documents: no windows, no best window
    assert main([*args, "--output", str(tmp_path / "pooled")]) == 0
    pooled = search_json(capsys, "--index", str(tmp_path / "pooled"), "--query", "brass key", "-k", "2")
    assert "best_window" not in pooled[0] and not (tmp_path / "pooled" / "windows.json").exists()


def test_aggregate_without_multivector_is_refused(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps(DOCS[0]) + "\n")
    base = [*INDEX, "--model", minilm, "--input", str(source), "--output", str(tmp_path / "out")]
    assert main([*base, "--aggregate", "top2"]) == 2
    assert "--aggregate works with --multivector" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- bad input


def _bad_input(root: Path) -> Path:
    import os

    root.mkdir()
    (root / "bread.txt").write_text("Bread is made from flour, water and yeast.", encoding="utf-8")
    (root / "bom.txt").write_bytes("\ufeffTea is brewed from leaves.".encode())
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.txt").write_text("  \n ", encoding="utf-8")
    (root / "latin1.txt").write_bytes(b"caf\xe9 au lait")
    (root / os.fsdecode(b"na\xefve.txt")).write_text("a name that is not UTF-8", encoding="utf-8")
    return root


def test_index_lists_every_bad_input_before_embedding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fair_retrieval.cli.cmd_index as cmd_index
    from fair_retrieval.embedding.embedder_options import EmbedderOptions

    def never(options: EmbedderOptions, model: Any) -> FairEmbedder:
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(cmd_index, "build_embedder", never)
    source, output = _bad_input(tmp_path / "docs"), tmp_path / "index"
    capsys.readouterr()
    assert main([*INDEX, "--model", "unused", "--input", str(source), "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert f"4 problems in {source}; nothing was indexed" in err and "--skip-bad-files" in err
    for name in ("blank.txt: the text is empty", "empty.txt: the text is empty", "latin1.txt is not UTF-8"):
        assert name in err
    assert "the file name 'na\\xefve.txt' is not UTF-8" in err
    assert not output.exists()


def test_index_skip_bad_files_indexes_the_rest(minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, output = _bad_input(tmp_path / "docs"), tmp_path / "index"
    capsys.readouterr()
    command = [*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), "--skip-bad-files"]
    assert main([*command, "--no-calibration"]) == 0
    out = capsys.readouterr().out
    assert "Indexed 2 documents" in out and "Skipped 4 bad entries (--skip-bad-files):" in out
    rows = [json.loads(line) for line in (output / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {row["id"]: row["text"] for row in rows} == {
        "bom.txt": "Tea is brewed from leaves.",  # the byte-order mark is removed
        "bread.txt": "Bread is made from flour, water and yeast.",
    }


def test_search_with_a_model_folder_that_does_not_exist_says_so(
    jsonl_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    missing = str(tmp_path / "nonexistent")
    for model in (missing, "./nonexistent-model"):
        assert main(["search", "--index", str(jsonl_index), "--query", "bread", "--model", model]) == 2
        err = capsys.readouterr().err
        assert "folder not found" in err and "differ" not in err, err


def test_search_json_is_valid_json_with_nan_metadata(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, output = tmp_path / "docs.jsonl", tmp_path / "index"
    source.write_text(
        '{"id": "a", "text": "Bread is baked from dough.", "score": NaN, "range": [Infinity, -Infinity, 1.5]}\n',
        encoding="utf-8",
    )
    assert main([*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), "--no-calibration"]) == 0
    capsys.readouterr()
    assert main(["search", "--index", str(output), "--query", "bread", "--json"]) == 0
    out = capsys.readouterr().out
    parsed = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    [result] = parsed["results"]
    assert result["metadata"] == {"score": None, "range": [None, None, 1.5]}


def test_an_unreadable_input_file_is_listed_and_skip_bad_files_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fair_retrieval.cli.cmd_index as cmd_index

    source = tmp_path / "docs"
    source.mkdir()
    (source / "good.txt").write_text("Bread is made from flour.", encoding="utf-8")
    (source / "locked.txt").write_text("no one may read this", encoding="utf-8")
    read_bytes = Path.read_bytes

    def refusing(self: Path) -> bytes:  # as root, chmod 000 does not stop a read: refuse it here
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied")
        return read_bytes(self)

    def model_stage(*_: Any) -> FairEmbedder:
        raise ValueError("the input was read; the model would load now")

    monkeypatch.setattr(Path, "read_bytes", refusing)
    monkeypatch.setattr(cmd_index, "build_embedder", model_stage)
    args = [*INDEX, "--model", "unused", "--input", str(source), "--output", str(tmp_path / "index")]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{source / 'locked.txt'} cannot be read (Permission denied)" in err and "Traceback" not in err
    assert "the model would load now" not in err  # refused before the model
    assert main([*args, "--skip-bad-files"]) == 2
    err = capsys.readouterr().err
    assert "the model would load now" in err and "Traceback" not in err  # skipped: the rest goes on to the model

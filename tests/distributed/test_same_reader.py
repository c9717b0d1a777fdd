"""`--engine local` and `--engine ray` read the same input into the same documents, or fail with the same error.

Both call `fair_retrieval.inputs` (the Ray engine on its workers, through `fair_retrieval.distributed.documents`),
so a JSONL file with metadata of every shape, odd ids and blank lines, or a folder with hidden and non-text files,
gives the same documents.jsonl on either engine; a bad line or a repeated id gives the same message, also when the
problem lies in another part of the file than the one read by the first Ray task.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fair_retrieval.cli import main
from fair_retrieval.distributed import documents as ray_documents
from fair_retrieval.inputs import read_documents

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

GOOD_LINES = [
    json.dumps({"id": "a", "text": "alpha words here", "metadata": {"k": 1}, "lang": "en"}),
    "",
    json.dumps({"id": 7, "text": "seven is a number", "metadata": "not a dict"}),
    json.dumps({"id": "07", "text": "a string id that is not the number 7"}),
    json.dumps({"text": "no id, so line-5 — é"}, ensure_ascii=False),
    "   \t",
    json.dumps({"id": "ü/ß", "text": "a unicode id", "metadata": None}, ensure_ascii=False),
    json.dumps({"id": -3, "text": "a negative id", "metadata": {"lang": "de"}, "score": 0.5}),
    json.dumps({"id": "e", "text": "a last id"}),  # an empty id is a bad line now (the stores' one id rule)
]
REPEATED = json.dumps({"id": 7, "text": "seven again"})  # line 3 used 7 already
BAD = json.dumps({"id": "b", "text": 5})


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _folder(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "b.md").write_text("# bee\n\nsome markdown", encoding="utf-8")
    (root / "sub" / "a.txt").write_text("ay é", encoding="utf-8")
    (root / "A.TXT").write_text("upper-case suffix", encoding="utf-8")
    (root / ".hidden" / "x.txt").write_text("hidden, never read", encoding="utf-8")
    (root / "picture.pdf").write_bytes(b"%PDF-1.4")
    return root


def _local(path: Path) -> list[str] | str:
    """documents.jsonl lines of the local reader, or its error."""
    try:
        return [document.to_json() for document in read_documents(path)]
    except ValueError as error:
        return f"ValueError: {error}"


def _on_ray(path: Path, tmp_path: Path) -> list[str] | str:
    """documents.jsonl lines of the Ray reader, or its error."""
    try:
        dataset, _ = ray_documents.documents_dataset(path)
    except ValueError as error:
        return f"ValueError: {error}"
    out = tmp_path / "ray-documents.jsonl"
    assert ray_documents.write_documents_file(dataset, out) == len(out.read_text(encoding="utf-8").splitlines())
    return out.read_text(encoding="utf-8").splitlines()


# ---------------------------------------------------------------------------------------------------- the readers


def test_a_jsonl_file_cut_into_many_ranges_reads_as_locally(
    ray_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_documents, "RANGE_BYTES", 64)  # one to three lines per Ray task: numbering crosses tasks
    lines = [*GOOD_LINES, "", *(json.dumps({"id": f"d{i}", "text": f"text {i}"}) for i in range(4))]
    source = _write(tmp_path / "docs.jsonl", lines)
    assert len(ray_documents._line_ranges(source)) == 6
    local = _local(source)
    assert isinstance(local, list) and len(local) == 7 + 4
    assert json.loads(local[1]) == {"id": "7", "text": "seven is a number", "metadata": {"metadata": "not a dict"}}
    assert json.loads(local[3])["id"] == "line-5"  # the physical line number: blank lines count
    assert _on_ray(source, tmp_path) == local


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([*GOOD_LINES, REPEATED], "line 10: id '7' was already used on line 3; ids must be unique."),
        ([*GOOD_LINES, BAD, REPEATED], "line 10: 'text' must be a string, got int."),
        ([*GOOD_LINES, REPEATED, BAD], "line 10: id '7' was already used on line 3"),
        ([*GOOD_LINES, '{"text": "broken"', REPEATED], "line 10: not valid JSON"),
        ([GOOD_LINES[0], json.dumps({"id": "line-3", "text": "x"}), "{}"], "line 3: no 'text' field"),
        ([json.dumps({"id": "line-3", "text": "x"}), "", json.dumps({"text": "y"})], "id 'line-3' was already used"),
        ([GOOD_LINES[0], '["a list"]'], "line 2: expected a JSON object per line, got list."),
        ([GOOD_LINES[0], json.dumps({"id": True, "text": "x"})], "line 2: 'id' must be a string or an integer"),
        (["", "  "], "Found no documents in"),
    ],
)
def test_bad_jsonl_gives_the_local_error(
    ray_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str], message: str
) -> None:
    monkeypatch.setattr(ray_documents, "RANGE_BYTES", 32)  # the problems lie in different Ray tasks
    source = _write(tmp_path / "docs.jsonl", lines)
    local = _local(source)
    assert isinstance(local, str) and message in local
    assert _on_ray(source, tmp_path) == _first_problem(local)


def _first_problem(local: str) -> str:
    """The error of the Ray engine, which stops at the first problem, for the local error, which lists them all."""
    lines = local.splitlines()
    return local if len(lines) == 1 else f"ValueError: {lines[1].strip()}"


def test_a_line_that_is_not_utf8_gives_the_local_error(ray_local: Any, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_bytes(GOOD_LINES[0].encode() + b'\n{"text": "caf\xe9"}\n' + REPEATED.encode() + b"\n")
    local = _local(source)
    assert local == f"ValueError: {source} line 2: not UTF-8 (invalid continuation byte); convert the file to UTF-8."
    assert _on_ray(source, tmp_path) == local


def test_a_folder_with_a_file_that_is_not_utf8_gives_the_local_error(ray_local: Any, tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    (root / "sub" / "z.txt").write_bytes(b"bad \xff")
    (root / "y.txt").write_bytes(b"bad \xfe")  # the later of the two in id order
    local = _local(root)
    assert isinstance(local, str) and local.startswith(f"ValueError: 2 problems in {root}; nothing was indexed.")
    assert local.splitlines()[1:] == [
        f"  {root / 'sub' / 'z.txt'} is not UTF-8 text (invalid start byte); convert it to UTF-8.",
        f"  {root / 'y.txt'} is not UTF-8 text (invalid start byte); convert it to UTF-8.",
    ]
    assert _on_ray(root, tmp_path) == _first_problem(local)


# ---------------------------------------------------------------------------------------------------- the command


def _index(engine: str, model: str, source: Path, output: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    """documents.jsonl of `fair-retrieval index --engine ENGINE`, and the warnings about skipped files."""
    command = [*INDEX, "--engine", engine, "--model", model, "--input", str(source), "--output", str(output)]
    if engine == "ray":
        command += ["--workers", "1", "--shard-size", "4"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        assert main(command) == 0
    skipped = [record.getMessage() for record in caplog.records if record.getMessage().startswith("Skipped")]
    return [*(output / "documents.jsonl").read_text(encoding="utf-8").splitlines(), *skipped]


@pytest.mark.parametrize("kind", ["jsonl", "folder"])
def test_both_engines_index_the_same_documents(
    ray_local: Any, tiny_bert: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    source = _write(tmp_path / "docs.jsonl", GOOD_LINES) if kind == "jsonl" else _folder(tmp_path / "docs")
    local = _index("local", tiny_bert, source, tmp_path / "local", caplog)
    assert _index("ray", tiny_bert, source, tmp_path / "ray", caplog) == local
    if kind == "folder":
        assert local.pop().startswith(f"Skipped 1 file under {source} that is not .txt or .md: .pdf (1).")
    rows = [json.loads(line) for line in local]
    if kind == "jsonl":
        assert [row["id"] for row in rows] == ["a", "7", "07", "line-5", "ü/ß", "-3", "e"]
        assert [row["metadata"] for row in rows][:3] == [{"lang": "en", "k": 1}, {"metadata": "not a dict"}, {}]
        assert rows[4]["metadata"] == {"metadata": None}
    else:
        assert [row["id"] for row in rows] == ["A.TXT", "b.md", "sub/a.txt"]


@pytest.mark.parametrize(
    "extra",
    [[REPEATED], [BAD, REPEATED]],
    ids=["repeated-id", "bad-line-before-a-repeated-id"],
)
def test_both_engines_refuse_a_bad_file_with_the_same_error(
    ray_local: Any, tiny_bert: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    source = _write(tmp_path / "docs.jsonl", [*GOOD_LINES, *extra])
    errors = []
    for engine in ("local", "ray"):
        command = [*INDEX, "--engine", engine, "--model", tiny_bert, "--input", str(source)]
        capsys.readouterr()
        assert main([*command, "--output", str(tmp_path / engine)]) == 2
        errors += [
            line for line in capsys.readouterr().err.splitlines() if line.startswith("fair-retrieval index: error:")
        ]
        assert not (tmp_path / engine / "manifest.json").exists()
    assert len(errors) == 2
    if len(extra) == 1:
        assert errors[0] == errors[1] and errors[0].startswith(f"fair-retrieval index: error: {source} line 10: ")
    else:  # the local engine lists every problem, the Ray engine stops at the first
        assert errors[0] == f"fair-retrieval index: error: {len(extra)} problems in {source}; nothing was indexed. " + (
            "Fix them, or skip what is bad with --skip-bad-files:"
        )
        assert errors[1].startswith(f"fair-retrieval index: error: {source} line 10: ")

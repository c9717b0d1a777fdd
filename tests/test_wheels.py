"""The built wheels, not the editable checkout: build all four, install them into a fresh venv, run them.

The fresh venv borrows the test environment's installed dependencies (torch, transformers, llama-index-core, …)
through a `.pth` line naming that site-packages folder, so nothing is downloaded; the four wheels themselves are
installed with `--no-deps`, and the test checks that `fair_retrieval` is imported from the wheel, not the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECTS = {
    "fair_retrieval": REPO,
    "langchain_fair": REPO / "integrations" / "langchain",
    "llama_index_embeddings_fair": REPO / "integrations" / "llamaindex",
    "llama_index_vector_stores_fair": REPO / "integrations" / "llamaindex-vector-stores",
}

pytestmark = pytest.mark.packaging

EMBED = """
import fair_retrieval, langchain_fair, llama_index.embeddings.fair as li
from fair_retrieval import FairEmbedder
from llama_index.vector_stores.fair import FairFaissVectorStore
import llama_index.vector_stores.fair as vs
print(fair_retrieval.__file__)
print(langchain_fair.__file__)
print(li.__file__)
print(vs.__file__)
print(FairEmbedder("sentence-transformers/all-MiniLM-L6-v2").embed_documents(["A wheel works."]).shape)
store = FairFaissVectorStore.create(dim=3, gpu=False)
print(store.class_name(), store.client.dim)
"""


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result  # type: ignore[no-any-return]


# Not copied into the build folder: what the wheels do not contain, and build leftovers of earlier runs.
NOT_BUILT = shutil.ignore_patterns(
    ".*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "integrations",
    "tests",
    "benchmarks",
    "cookbook",
    "docs",
    "runs",
)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four wheels, each built from a clean copy of its project (the checkout gets no build/ folder)."""
    pytest.importorskip("build", reason="the wheel test needs the `build` package (dev extra)")
    out = tmp_path_factory.mktemp("dist")
    built = {}
    for name, project in PROJECTS.items():
        source = shutil.copytree(project, out / "src" / name, ignore=NOT_BUILT)
        run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out / name), str(source)])
        [wheel] = (out / name).glob("*.whl")
        built[name] = wheel
    return built


def test_wheels_carry_spdx_license_metadata_and_the_license_file(wheels: dict[str, Path]) -> None:
    for wheel in wheels.values():
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
            text = archive.read(metadata).decode("utf-8")
        assert "License-Expression: Apache-2.0" in text, wheel.name
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), wheel.name
        assert not any(n.startswith(("tests/", "benchmarks/")) for n in names), wheel.name


def test_installed_wheels_run_the_cli_and_embed(wheels: dict[str, Path], tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    child_site = Path(
        run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index"]
    run([*pip, *(str(w) for w in wheels.values())], env=environment)  # before borrowing: pip sees an empty venv
    (child_site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = env_dir / ("Scripts/fair-retrieval.exe" if os.name == "nt" else "bin/fair-retrieval")
    helped = run([str(script), "demo", "--help"], env=environment, cwd=tmp_path)
    assert "usage: fair-retrieval demo" in helped.stdout
    printed = run([str(python), "-c", EMBED], env=environment, cwd=tmp_path).stdout.splitlines()
    assert all(line.startswith(str(env_dir)) for line in printed[:4]), printed  # the wheels, not the checkout
    assert printed[4] == "(1, 384)"
    assert printed[5:] == ["FairFaissVectorStore 3"], printed

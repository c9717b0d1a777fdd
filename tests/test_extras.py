"""No install the READMEs or the documentation recommend puts faiss-cpu and faiss-gpu in one environment (they are
the same module).

The extras of fair-retrieval and of the integration packages are read with tomllib; every `pip install` command in
the READMEs and the pages of docs/ is parsed into its requirements (a local project with extras, or a distribution),
references such as `fair-retrieval[faiss]` are followed, and the faiss distributions each command (and each section
of a page, whose commands go into one environment) would install are collected. A command naming an extra that its
project does not have fails.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
PROJECT_FOLDERS = [
    REPO,
    REPO / "integrations" / "langchain",
    REPO / "integrations" / "llamaindex",
    REPO / "integrations" / "llamaindex-vector-stores",
]
DOCS_PAGES = sorted((REPO / "docs").rglob("*.md"))
READMES = [REPO / "README.md", *(folder / "README.md" for folder in PROJECT_FOLDERS[1:]), *DOCS_PAGES]
FAISS = {"faiss-cpu": "cpu", "faiss-gpu": "gpu", "faiss-gpu-cu11": "gpu", "faiss-gpu-cu12": "gpu"}
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_projects() -> dict[str, tuple[Path, dict]]:
    projects = {}
    for folder in PROJECT_FOLDERS:
        data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        projects[normalise(data["name"])] = (folder, data)
    return projects


PROJECTS = load_projects()
BY_FOLDER = {folder.resolve(): name for name, (folder, _) in PROJECTS.items()}


def distributions(name: str, extras: set[str], seen: set[tuple[str, str]] | None = None) -> set[str]:
    """Every distribution `name[extras]` pulls in, following our own projects' extras (others: the name only)."""
    seen = set() if seen is None else seen
    name = normalise(name)
    if name not in PROJECTS:
        return {name}
    found = {name}
    _, data = PROJECTS[name]
    requirements = list(data.get("dependencies", []))
    for extra in sorted(extras):
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        if extra not in data.get("optional-dependencies", {}):
            raise AssertionError(f"{name} has no extra {extra!r} (used by a README command)")
        requirements += data["optional-dependencies"][extra]
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        assert match, requirement
        sub_extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        found |= distributions(match.group(1), sub_extras, seen)
    return found


def command_targets(command: str, base: Path) -> list[tuple[str, set[str]]]:
    """The (distribution, extras) a `pip install ...` command names; local folders become their project names."""
    words = shlex.split(command.split("#", 1)[0])
    words = words[words.index("install") + 1 :]
    targets = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
            continue
        if word in ("-c", "--index-url", "--extra-index-url", "-r"):
            skip_next = True
            continue
        if word.startswith("-"):
            continue
        spec, _, extras_text = word.partition("[")
        extras = {e.strip() for e in extras_text.rstrip("]").split(",") if e.strip()}
        if spec.startswith("."):
            folder = (base / spec).resolve()
            assert folder in BY_FOLDER, f"{word}: not one of our projects"
            targets.append((BY_FOLDER[folder], extras))
        else:
            targets.append((re.split(r"[=<>!~]", spec)[0], extras))
    return targets


def readme_commands() -> list[tuple[str, str, str]]:
    """(page, section, command) for every `pip install` in the READMEs and docs pages (code blocks and inline code)."""
    found = []
    for readme in READMES:
        section, in_code = "top", False
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and re.match(r"#{1,6} ", line):
                section = line.lstrip("# ").strip()
            for piece in re.split(r"&&|`", line):
                if re.search(r"\bpip install\b", piece):
                    found.append((readme.relative_to(REPO).as_posix(), section, piece.strip()))
    return found


def faiss_kinds(targets: list[tuple[str, set[str]]]) -> dict[str, str]:
    installed: set[str] = set()
    for name, extras in targets:
        installed |= distributions(name, extras)
    return {dist: FAISS[dist] for dist in installed if dist in FAISS}


def test_extras_choose_one_faiss_each() -> None:
    root = PROJECTS["fair-retrieval"][1]["optional-dependencies"]
    assert faiss_kinds([("fair-retrieval", {"faiss"})]) == {"faiss-cpu": "cpu"}
    assert faiss_kinds([("fair-retrieval", {"gpu"})]) == {"faiss-gpu": "gpu"}
    assert faiss_kinds([("fair-retrieval", {"dev"})]) == {}  # dev pins neither: CI adds the faiss extra
    assert faiss_kinds([("fair-retrieval", {"gpu", "dev"})]) == {"faiss-gpu": "gpu"}
    assert all(faiss_kinds([(name, set())]) == {} for name in PROJECTS)  # no faiss without an extra
    for name, (_, data) in PROJECTS.items():
        for extra in data.get("optional-dependencies", {}):
            kinds = set(faiss_kinds([(name, {extra})]).values())
            assert len(kinds) <= 1, f"{name}[{extra}] installs both faiss builds"
            if extra in ("faiss", "gpu"):
                assert kinds == {"cpu" if extra == "faiss" else "gpu"}, f"{name}[{extra}]"
    assert set(root) >= {"faiss", "gpu", "dev"}


COMMANDS = readme_commands()


def test_the_readmes_recommend_installs() -> None:
    assert len(COMMANDS) >= 5
    assert any("[gpu" in command for _, _, command in COMMANDS)  # the GPU guide has its command
    assert any(readme.startswith("docs/") for readme, _, _ in COMMANDS)  # the docs pages are read


@pytest.mark.parametrize(("readme", "section", "command"), COMMANDS)
def test_no_readme_command_installs_both_faiss_builds(readme: str, section: str, command: str) -> None:
    base = REPO  # the READMEs' commands run from the repository root
    kinds = set(faiss_kinds(command_targets(command, base)).values())
    assert len(kinds) <= 1, f"{readme} ({section}): `{command}` installs faiss-cpu and faiss-gpu"
    same_section = [c for r, s, c in COMMANDS if (r, s) == (readme, section)]
    together = [t for c in same_section for t in command_targets(c, base)]
    assert len(set(faiss_kinds(together).values())) <= 1, f"{readme} ({section}) mixes faiss-cpu and faiss-gpu"

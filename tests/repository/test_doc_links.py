"""Every link in the README and the docs resolves: a relative link names a file of the repository,
and a link to a section names a heading of that file (GitHub's anchors)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "cpp").rglob("README.md")]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```", re.DOTALL)


def anchors(path: Path) -> set[str]:
    """GitHub's anchor of each heading: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in CODE.sub("", path.read_text()).splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(CODE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not checked here (no network)
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such section")
    return broken


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(path):
    assert not broken_links(path)


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# A title, with punctuation\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](other.md#a-title-with-punctuation) [gone](missing.md) [bad](other.md#nothing)\n"
        "[web](https://example.com) [here](#local)\n\n## Local\n"
    )
    assert broken_links(doc) == ["missing.md: no such file", "other.md#nothing: no such section"]


def test_the_readme_stays_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 220

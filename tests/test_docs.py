"""Every relative link in README.md and docs/*.md resolves: the file exists and, for a heading
anchor, the heading does (GitHub's slugs). No node needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without code, whose brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    heading = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a file's headings (a repeated one gets -1, -2, …)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_the_slugs_are_github_s():
    assert _slug("Today's figures") == "todays-figures"
    assert _slug("Engram against Mem0: what Mem0's user_id does and does not enforce") == \
        "engram-against-mem0-what-mem0s-user_id-does-and-does-not-enforce"
    assert _slug("`scripts/dev`") == "scriptsdev"

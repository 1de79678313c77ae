"""The documentation builds, and its links hold: ``mkdocs build --strict`` of docs/ (mkdocs.yml) passes, a broken
link or heading anchor in a copy of it fails the build naming the link, and every relative link and ``#anchor``
of README.md and CONTRIBUTING.md (outside docs/, so outside the build) resolves by the same heading-slug rule
as the build's (mkdocs.yml's ``toc`` ``slugify``: pymdown-extensions' GitHub-like slugs).

Also: the supported-version table of README.md "Install into your Spark" and docs/install.md "Supported
versions" is the same table, and README.md stays a front page (at most 15,000 bytes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pymdownx.slugs import slugify

ROOT = Path(__file__).resolve().parents[2]
#: the slug rule mkdocs.yml gives the toc extension (GitHub's: lower case, hyphens kept)
SLUG = slugify(case="lower")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
                          timeout=120)


def _prose_lines(text: str) -> list[str]:
    """The lines of a markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def heading_anchors(path: Path) -> set[str]:
    """The anchors of the headings of markdown file ``path``, as the build's toc extension makes them (a repeated
    heading gets ``_1``, ``_2``, ...)."""
    anchors: set[str] = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = SLUG(m.group(1), "-")
            unique, n = slug, 0
            while unique in anchors:
                n += 1
                unique = f"{slug}_{n}"
            anchors.add(unique)
    return anchors


def broken_links(path: Path) -> list[str]:
    """Every relative link of markdown file ``path`` whose file does not exist or whose ``#anchor`` is no heading
    of its target markdown file, as ``"target: why"``."""
    problems = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                problems.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
            elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
                problems.append(f"{target}: {dest.name} has no heading with the anchor #{anchor}")
    return problems


def test_mkdocs_config_uses_the_slug_rule_checked_here():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "pymdownx.slugs.slugify {kwds: {case: lower}}" in text
    assert re.search(r"^strict: true$", text, re.M)
    assert re.search(r"^docs_dir: docs$", text, re.M)


def test_docs_build_strict(tmp_path):
    result = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "register_data_sources" in api and "read_table" in api, "the API page holds no docstrings"


def test_docs_build_fails_on_a_broken_link_and_anchor(tmp_path):
    """A copy of docs/ with a link to a missing page and one to a missing heading: the build fails naming both."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "connector").symlink_to(ROOT / "connector")  # the API page's source (mkdocstrings paths: [.])
    page = tmp_path / "docs" / "install.md"
    page.write_text(page.read_text(encoding="utf-8")
                    + "\n[gone](no_such_page.md) and [moved](source.md#no-such-heading)\n", encoding="utf-8")
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "no_such_page.md" in output
    assert "no-such-heading" in output


def test_docs_build_fails_on_a_page_missing_from_the_nav(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text(encoding="utf-8")
                                         .replace("troubleshooting.md", "no_such_guide.md"), encoding="utf-8")
    (tmp_path / "connector").symlink_to(ROOT / "connector")
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no_such_guide.md" in result.stdout + result.stderr


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_links_outside_docs_resolve(name):
    problems = broken_links(ROOT / name)
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_link_check_finds_a_broken_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A `code` heading: here\n\n[ok](#a-code-heading-here) [bad](#a-code-heading)\n"
                    "```\n[in code](#ignored)\n```\n[file](missing.md)\n", encoding="utf-8")
    assert broken_links(page) == [
        "#a-code-heading: page.md has no heading with the anchor #a-code-heading",
        f"missing.md: no file {tmp_path / 'missing.md'}",
    ]


def _version_table(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("| | supported range | tested by `make test` |")
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_the_version_table_is_the_same_in_readme_and_docs():
    assert _version_table(ROOT / "README.md") == _version_table(ROOT / "docs" / "install.md")


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_bytes()) <= 15_000

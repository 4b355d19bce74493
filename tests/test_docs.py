"""Every Python code block of README.md and docs/*.md runs as written, and every link and
file reference in them resolves in a clone.

The blocks of one file run in order in one fresh interpreter (a later block may
use names from an earlier one), in a temporary working directory (files they
write, such as a ledger, land there), with ``FASTDP_DATA`` pointing at the
real datasets.  A block preceded by the line ``<!-- not run: REASON -->`` is
skipped (for sketches that need the user's own files, or a cluster).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastdp.datasets import dataset_search_paths

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?:^<!-- not run: (?P<reason>.*?) -->\n)?^```python\n(?P<code>.*?)^```",
                    re.S | re.M)


def python_blocks(path):
    """``[(code, skip_reason or None), ...]`` of a Markdown file, in order."""
    return [(m["code"], m["reason"]) for m in _BLOCK.finditer(path.read_text(encoding="utf-8"))]


def _data_dir():
    for path in dataset_search_paths():
        if (path / "a9a").is_dir():
            return path
    return None


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_code_blocks_run_as_written(path, tmp_path):
    data = _data_dir()
    if data is None:
        pytest.skip("the real datasets are not found (set FASTDP_DATA to shared/data)")
    code = "\n".join(block if reason is None else f"# not run: {reason}\n"
                     for block, reason in python_blocks(path))
    env = dict(os.environ, FASTDP_DATA=str(data), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{path.name}:\n{done.stderr[-3000:]}"


def test_block_parser_sees_skips():
    text = "a\n<!-- not run: needs a cluster -->\n```python\nx = 1\n```\n```python\ny = 2\n```\n"
    path = Path(os.devnull)
    blocks = [(m["code"], m["reason"]) for m in _BLOCK.finditer(text)]
    assert blocks == [("x = 1\n", "needs a cluster"), ("y = 2\n", None)]
    assert path  # the helper itself is exercised by the parametrised test


# --------------------------------------------------------------------------- #
# Every link and file reference of the docs resolves in a clone
# --------------------------------------------------------------------------- #
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_TICKED = re.compile(r"`([^`\s]+)`")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_IGNORED = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")} if (ROOT / ".gitignore").exists() else set()
# the top-level names of a clone (not build output, caches or other ignored files)
_TOP_LEVEL = {p.name for p in ROOT.iterdir()
              if (p.name == ".ci" or not p.name.startswith(".")) and p.name not in _IGNORED}
# what a clone cannot resolve: a tracker it does not have, files beside it, fixed temp paths
_UNRESOLVABLE = {
    "an issue number of a tracker a clone does not have": re.compile(r"\bissues? #?\d+",
                                                                     re.I),
    "a path outside the clone (../shared, ...)": re.compile(r"\.\./shared|\.\./\.\./"),
    "a fixed path under the system temporary directory": re.compile(r"(?<![\w.])/tmp/"),
    "a document a clone does not have": re.compile(r"\bspec \d{3}\b|\bresearch note\b", re.I),
}


def _slug(heading):
    """GitHub's anchor of a Markdown heading."""
    # code spans and emphasis marks vanish; underscores inside words stay (record_history)
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path):
    seen, anchors = {}, set()
    for line in _FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            slug = _slug(line.lstrip("#"))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def broken_links(path):
    """``[(target, reason), ...]`` of the Markdown links of ``path`` that do not resolve."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):           # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
            broken.append((target, "no such file in the repository"))
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append((target, f"no heading #{anchor} in {resolved.name}"))
    return broken


def _is_placeholder(token):
    return (any(c in token for c in "*{}<>…|$")
            or "..." in token
            or any(re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\w+)*", part) for part in token.split("/")))


def missing_paths(path):
    """Backticked repository paths of ``path`` (``fastdp/...``, ``tests/...``, ...) that a
    clone does not have; placeholders (``OUT/SEED.md``, ``*.pyx``) are not paths."""
    missing = []
    for token in _TICKED.findall(path.read_text(encoding="utf-8")):
        token = token.split("::")[0].rstrip(".,:;)")
        if "/" not in token or token.split("/")[0] not in _TOP_LEVEL or _is_placeholder(token):
            continue
        if not (ROOT / token).exists():
            missing.append(token)
    return missing


def unresolvable_mentions(path):
    """``[(line number, what), ...]`` of mentions a clone cannot resolve."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for what, pattern in _UNRESOLVABLE.items():
            if pattern.search(line):
                found.append((number, what))
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_links_and_file_references_resolve_in_a_clone(path):
    assert broken_links(path) == []
    assert missing_paths(path) == []
    assert unresolvable_mentions(path) == []


def test_the_reference_checks_catch_what_a_clone_cannot_resolve(tmp_path, monkeypatch):
    text = ("# Title\n## A heading, with `code`\n[ok](cli.md#title) [ok](#a-heading-with-code)\n"
            "[gone](nosuch.md) [anchor](cli.md#no-such-heading) [web](https://example.org)\n"
            "`fastdp/_validation.py` `fastdp/cli/entry.py` `OUT/SEED.md` `tests/*.py`\n"
            "see issue 18, spec 000 and ../shared/data; write /tmp/x\n"
            "```python\n[inside](a-code-block.md)\n```\n")
    fake = tmp_path / "page.md"
    fake.write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "fastdp" / "cli").mkdir(parents=True)
    (tmp_path / "fastdp" / "cli" / "entry.py").write_text("")
    (tmp_path / "cli.md").write_text("# Title\n")
    monkeypatch.setattr(sys.modules[__name__], "_TOP_LEVEL", {"fastdp", "tests"})
    assert [t for t, _ in broken_links(fake)] == ["nosuch.md", "cli.md#no-such-heading"]
    assert missing_paths(fake) == ["fastdp/_validation.py"]
    assert [n for n, _ in unresolvable_mentions(fake)] == [6, 6, 6, 6]


def test_a_missing_dataset_points_to_a_page_a_clone_has(tmp_path):
    from fastdp.datasets import load_dataset
    from fastdp.exceptions import DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("a9a", data_home=tmp_path)
    pages = re.findall(r"docs/[\w-]+\.md", str(info.value))
    assert pages and all((ROOT / page).is_file() for page in pages)
    assert "MANIFEST" not in str(info.value) and "shared/data's" not in str(info.value)
    text = (ROOT / pages[0]).read_text(encoding="utf-8")
    for name in ("a9a/a9a.bz2", "phishing/phishing.bz2", "FASTDP_DATA", "load_libsvm",
                 "fastdp train"):
        assert name in text

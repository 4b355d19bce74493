"""Every Python code block of README.md and docs/*.md runs as written.

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

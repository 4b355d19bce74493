"""`convert --overwrite` onto a full disk keeps the old dataset and leaves no work directory.

Needs a tiny tmpfs (mounted as root); skipped where mounting is not allowed.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from fastdp.datasets import convert_libsvm, open_binary


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def _write(path, rows, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as handle:
        for _ in range(rows):
            cols = np.sort(rng.choice(100, 10, replace=False)) + 1
            handle.write(f"{rng.choice([-1, 1])} "
                         + " ".join(f"{j}:{rng.random():.4f}" for j in cols) + "\n")


def test_full_disk_keeps_the_old_dataset_and_no_partial_directory(tmp_path, tiny_disk):
    small, big = tmp_path / "small.svm", tmp_path / "big.svm"
    _write(small, 50)
    _write(big, 20000)          # about 2.4 MB of arrays: does not fit in 256 KiB
    dst = tiny_disk / "x.fdp"
    convert_libsvm(small, dst)
    with pytest.raises(OSError):
        convert_libsvm(big, dst, overwrite=True)
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["x.fdp"]
    assert open_binary(dst)[0].shape[0] == 50
    # the same through the command line: exit status 1, one line, nothing left behind
    done = subprocess.run([sys.executable, "-m", "fastdp", "convert", str(big), str(dst),
                           "--overwrite"], capture_output=True, text=True)
    assert done.returncode == 1 and "No space left" in done.stderr
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["x.fdp"]

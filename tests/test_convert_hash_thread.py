"""The source's SHA-256 computed on a background thread (fastdp.io._hashing).

The reference is ``hashlib.sha256`` of the file's bytes read whole (the raw
bytes: compressed ones for a compressed file, as before the thread).
"""

import bz2
import gzip
import hashlib
import lzma
import threading
import time

import numpy as np
import pytest

import fastdp.io._source as source_module
from fastdp.exceptions import LibsvmParseError
from fastdp.io import convert_libsvm
from fastdp.io._hashing import BackgroundHasher
from fastdp.io._source import LineChunks


def _hash_threads():
    return [t for t in threading.enumerate() if t.name == "fastdp-sha256"]


def _text(n_rows, seed=0, final_newline=True):
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_rows):
        cols = np.sort(rng.choice(50, size=rng.integers(1, 8), replace=False)) + 1
        feats = " ".join(f"{c}:{v:.6g}" for c, v in zip(cols, rng.normal(size=len(cols))))
        lines.append(f"{i % 2} {feats}")
    text = "\n".join(lines) + ("\n" if final_newline else "")
    return text.encode("ascii")


def _digest_by_chunks(path, buffer_bytes):
    with LineChunks(path, sha256=True, buffer_bytes=buffer_bytes) as source:
        parts = [bytes(chunk) for chunk in source]
    return source.sha256, b"".join(parts)


CONTENTS = {
    "rows": _text(400),
    "no_final_newline": _text(300, seed=1, final_newline=False),
    "empty": b"",
    "one_line_no_newline": b"1 3:0.5",
    "long_line": b"1 " + b" ".join(b"%d:1" % i for i in range(1, 3000)) + b"\n0 1:2\n",
}


@pytest.mark.parametrize("name", sorted(CONTENTS))
@pytest.mark.parametrize("buffer_bytes", [7, 64, 1000, 4096, None])
def test_digest_equals_hashlib(tmp_path, name, buffer_bytes):
    data = CONTENTS[name]
    path = tmp_path / "data.svm"
    path.write_bytes(data)
    before = _hash_threads()
    digest, text = _digest_by_chunks(path, buffer_bytes)
    assert text == data  # the chunks themselves are unchanged
    assert digest == hashlib.sha256(data).hexdigest()
    assert _hash_threads() == before


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
@pytest.mark.parametrize("buffer_bytes", [64, None])
def test_compressed_source_hashes_the_compressed_bytes(tmp_path, compress, buffer_bytes):
    data = _text(2000, seed=2)
    raw = compress(data)
    path = tmp_path / "data.svm.z"
    path.write_bytes(raw)
    digest, text = _digest_by_chunks(path, buffer_bytes)
    assert text == data
    assert digest == hashlib.sha256(raw).hexdigest()
    assert digest != hashlib.sha256(data).hexdigest()


def test_file_object_source(tmp_path):
    data = _text(500, seed=3)
    path = tmp_path / "data.svm"
    path.write_bytes(data)
    with open(path, "rb") as handle, LineChunks(handle, sha256=True, buffer_bytes=256) as src:
        for _ in src:
            pass
    assert src.sha256 == hashlib.sha256(data).hexdigest()


class _SlowSha256:
    """A SHA-256 that waits before hashing: a buffer changed too early shows in the digest."""

    def __init__(self):
        self._hash = hashlib.sha256()

    def update(self, buffer):
        time.sleep(0.002)
        self._hash.update(buffer)

    def hexdigest(self):
        return self._hash.hexdigest()


def test_buffer_is_not_reused_before_it_is_hashed(tmp_path, monkeypatch):
    data = _text(300, seed=4)
    path = tmp_path / "data.svm"
    path.write_bytes(data)
    monkeypatch.setattr(source_module, "BackgroundHasher",
                        lambda: BackgroundHasher(factory=_SlowSha256))
    with LineChunks(path, sha256=True, buffer_bytes=128) as source:
        chunks = [bytes(chunk) for chunk in source]  # parse fast, hash slowly
    assert b"".join(chunks) == data
    assert source.sha256 == hashlib.sha256(data).hexdigest()


def test_convert_header_records_the_hashlib_digest(tmp_path):
    data = _text(1000, seed=5)
    for name, raw in (("plain.svm", data), ("packed.svm.gz", gzip.compress(data))):
        path = tmp_path / name
        path.write_bytes(raw)
        header = convert_libsvm(path, tmp_path / (name + ".fdp"), dtype=np.float32)
        assert header["source"]["sha256"] == hashlib.sha256(raw).hexdigest()
        assert header["source"]["size"] == len(raw)


def test_parse_error_mid_file_leaves_no_thread_and_no_output(tmp_path):
    good = _text(60_000, seed=6)  # a few MiB: several chunks hashed before the error
    assert len(good) > 2 * source_module.CHUNK_BYTES
    path = tmp_path / "bad.svm"
    path.write_bytes(good + b"1 3:0.5 this is not a feature\n" + _text(100, seed=7))
    threads_before = set(threading.enumerate())
    with pytest.raises(LibsvmParseError):
        convert_libsvm(path, tmp_path / "bad.fdp")
    assert set(threading.enumerate()) == threads_before
    assert not _hash_threads()
    assert not (tmp_path / "bad.fdp").exists()


def test_abandoned_iteration_stops_the_thread(tmp_path):
    path = tmp_path / "data.svm"
    path.write_bytes(_text(2000, seed=8))
    before = set(threading.enumerate())
    with LineChunks(path, sha256=True, buffer_bytes=256) as source:
        for _ in source:
            assert _hash_threads()  # the hash runs beside the parsing
            break
    assert source.sha256 is None
    assert set(threading.enumerate()) == before


class _FailingSha256:
    def __init__(self):
        self.calls = 0

    def update(self, buffer):
        self.calls += 1
        if self.calls == 2:  # the first is the 6 bytes read to find the compression
            raise MemoryError("hash failed")

    def hexdigest(self):  # pragma: no cover - never reached
        return "0" * 64


def test_error_in_the_hash_thread_surfaces_in_the_caller(tmp_path, monkeypatch):
    path = tmp_path / "data.svm"
    path.write_bytes(_text(2000, seed=9))
    monkeypatch.setattr(source_module, "BackgroundHasher",
                        lambda: BackgroundHasher(factory=_FailingSha256))
    before = set(threading.enumerate())
    with pytest.raises(MemoryError, match="hash failed"):
        with LineChunks(path, sha256=True, buffer_bytes=256) as source:
            for _ in source:
                pass
    assert set(threading.enumerate()) == before
    with pytest.raises(MemoryError, match="hash failed"):
        convert_libsvm(path, tmp_path / "out.fdp")
    assert not (tmp_path / "out.fdp").exists()
    assert set(threading.enumerate()) == before


def test_background_hasher_in_isolation():
    rng = np.random.default_rng(10)
    pieces = [rng.bytes(int(n)) for n in rng.integers(0, 10_000, size=50)]
    with BackgroundHasher() as hasher:
        for piece in pieces:
            hasher.update(piece)
        assert hasher.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()
    assert not _hash_threads()
    with BackgroundHasher() as unused:  # never fed: no thread, the empty digest
        assert unused.hexdigest() == hashlib.sha256(b"").hexdigest()
    failing = BackgroundHasher(factory=_FailingSha256)
    for piece in pieces[:5]:
        failing.update(piece)
    with pytest.raises(MemoryError):
        failing.wait()
    with pytest.raises(ValueError, match="failed"):
        failing.update(b"more")
    failing.close()
    assert not _hash_threads()

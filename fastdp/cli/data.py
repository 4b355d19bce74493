"""What the ``fastdp`` commands read: LIBSVM files, binary datasets, bundled datasets, saved models."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def _libsvm_errors(path, missing_hint=""):
    """Turn a failure to read the LIBSVM file ``path`` into a clear ValidationError.

    A parse error, a directory and a missing file (with ``missing_hint``
    appended to its message) each get their own advice.
    """
    from fastdp.exceptions import LibsvmParseError, ValidationError

    try:
        yield
    except LibsvmParseError as exc:
        raise ValidationError(f"{path}: {exc}; fix the file (LIBSVM lines read "
                              "'LABEL INDEX:VALUE ...').") from exc
    except IsADirectoryError:
        raise ValidationError(f"{path} is a directory, not a LIBSVM file.") from None
    except FileNotFoundError:
        raise ValidationError(f"no such file: {path}{missing_hint}") from None


def _load_binary(spec, n_features, dtype):
    """(X, y, description) of a binary dataset (``fastdp convert`` output), memory-mapped."""
    from fastdp.exceptions import ValidationError
    from fastdp.io.binary import open_binary
    from fastdp.io.libsvm import csr_from_arrays

    X, y = open_binary(spec)
    if dtype is not None and X.dtype != dtype:
        raise ValidationError(f"{spec} holds {X.dtype} values; convert it again with --dtype "
                              f"{dtype} (or drop --dtype)")
    if n_features is not None and X.shape[1] != n_features:
        if X.shape[1] > n_features:
            _too_many_features(spec, X.shape[1], n_features)
        # the same arrays read as a wider matrix: the extra columns are empty
        X = csr_from_arrays(X.data, X.indices, X.indptr, (X.shape[0], n_features))
    return X, y, spec


def _too_many_features(spec, found, expected):
    from fastdp.exceptions import ValidationError

    raise ValidationError(f"{spec} has {found} features but the model expects {expected}.")


#: leading bytes of compressed formats fastdp does not read, and their names
_UNSUPPORTED_COMPRESSION = ((b"\x28\xb5\x2f\xfd", "zstd (.zst)"), (b"PK\x03\x04", "zip"),
                            (b"\x04\x22\x4d\x18", "lz4"), (b"7z\xbc\xaf\x27\x1c", "7z"))


def _refuse_unsupported_compression(path):
    """A clear error for a file compressed in a format the LIBSVM reader does not read.

    The reader opens plain, gzip, bzip2 and xz files; any other compressed
    file would otherwise be parsed as text and fail on its first line.
    """
    from fastdp.exceptions import ValidationError

    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return   # the loader reports a missing or unreadable file
    for magic, name in _UNSUPPORTED_COMPRESSION:
        if head.startswith(magic):
            raise ValidationError(f"{path} is {name}-compressed, which fastdp does not read; "
                                  "decompress it first or recompress it with gzip, bzip2 or "
                                  "xz (.gz, .bz2, .xz).")


def _named_dataset(spec, dtype):
    """(X, y, description) of ``dataset:NAME[:SUBSET]``.

    A LIBSVM dataset is read with the labels its file holds (``labels="file"``),
    exactly what a path to the same file gives, so a model trained on one
    spelling is evaluated on the other with the same labels.
    """
    from fastdp.datasets import DATASETS, load_dataset

    parts = spec.split(":")
    name = parts[1]
    subset = parts[2] if len(parts) > 2 else "train"
    labels = "file" if DATASETS.get(name, {}).get("kind") == "libsvm" else "mapped"
    X, y = load_dataset(name, subset=subset, dtype=dtype, labels=labels)
    return X, y, f"{name} ({subset})"


def _load_data(spec, n_features=None, dtype=None):
    """(X, y, description) of a LIBSVM path, a binary dataset or ``dataset:NAME[:SUBSET]``."""
    from fastdp.io.binary import is_binary_dataset

    if is_binary_dataset(spec) or spec.endswith(".fdp"):
        return _load_binary(spec, n_features, dtype)
    dtype = dtype or "float64"
    if spec.startswith("dataset:"):
        X, y, where = _named_dataset(spec, dtype)
        if n_features is not None and X.shape[1] != n_features:
            _too_many_features(spec, X.shape[1], n_features)
        return X, y, where
    from fastdp.datasets import DATASETS, load_libsvm

    _refuse_unsupported_compression(spec)
    hint = (f"; for the bundled dataset use dataset:{spec}" if spec in DATASETS else "")
    with _libsvm_errors(spec, hint):
        X, y = load_libsvm(spec, n_features=n_features, dtype=dtype, progress=None)
    return X, y, spec


def _utility(model, X, y):
    """(name, value) of the model's (or a saved pipeline's) utility on (X, y)."""
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    if type(final).__name__ == "DPRidge":
        residual = model.predict(X) - y
        return "MSE", float((residual ** 2).mean())
    return "accuracy", float(model.score(X, y))


def _read_key(key_file):
    """The bytes of ``--key-file`` (None without one): a small regular file."""
    if key_file is None:
        return None
    from fastdp._model_files import read_regular_file

    return read_regular_file(key_file, "key file", 2**16)


def _load_model(path, key_file=None):
    from fastdp.persistence import load_model

    return load_model(path, key=_read_key(key_file))

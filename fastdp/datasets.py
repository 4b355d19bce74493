"""Data layer: a fast LIBSVM loader, LIBSVM-like synthetic data and the real datasets.

Privacy meaning
---------------
Nothing in this module releases anything: loading and generating data spend no
privacy budget. The functions here only *read* the private data set; what later
touches it (preprocessing, solvers) states its own privacy meaning. The real
datasets are public research data; IPUMS-BR is loadable for reproductions but
must never be copied into the repository or a package (IPUMS terms of use).

Public API
----------
load_libsvm, iter_libsvm_chunks, convert_libsvm, open_binary
    LIBSVM files (streamed, by byte range, in chunks) and fastdp's on-disk
    binary CSR; defined in :mod:`fastdp.io`, re-exported here.
make_sparse_classification, make_sparse_regression
    Synthetic sparse data (Zipf column popularity, Poisson row lengths,
    lognormal values, unit-norm rows, a planted linear model).
load_dataset, DATASETS
    Public real datasets by name, read from a data home laid out as
    docs/your-data.md describes (where each comes from, the file names).
"""

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fastdp._validation import check_integer
from fastdp.exceptions import DatasetNotFoundError, ValidationError
from fastdp.io._source import LineChunks
from fastdp.io.binary import convert_libsvm, is_binary_dataset, open_binary
from fastdp.io.libsvm import iter_libsvm_chunks, load_libsvm

__all__ = [
    "load_libsvm",
    "iter_libsvm_chunks",
    "convert_libsvm",
    "open_binary",
    "make_sparse_classification",
    "make_sparse_regression",
    "load_dataset",
    "dataset_search_paths",
    "DATASETS",
]

# --------------------------------------------------------------------------- #
# Synthetic LIBSVM-like data
# --------------------------------------------------------------------------- #


def _sparse_design(n_samples, n_features, nnz_per_row, zipf_offset, value_sigma, rng):
    """Unit-row CSR design: Zipf column popularity, 1 + Poisson row lengths."""
    popularity = 1.0 / (np.arange(n_features, dtype=np.float64) + zipf_offset)
    popularity /= popularity.sum()
    column_of_rank = rng.permutation(n_features)  # scatter popular columns over the index range
    row_lengths = 1 + rng.poisson(nnz_per_row - 1, size=n_samples)
    indptr = np.zeros(n_samples + 1, dtype=np.int64)
    np.cumsum(row_lengths, out=indptr[1:])
    total = int(indptr[-1])
    ranks = rng.choice(n_features, size=total, p=popularity)
    columns = column_of_rank[ranks].astype(np.int32)
    values = rng.lognormal(0.0, value_sigma, size=total)
    X = sp.csr_matrix((values, columns, indptr.astype(np.int32) if total < 2**31 else indptr),
                      shape=(n_samples, n_features))
    X.sum_duplicates()  # sorts indices and merges repeated columns of a row
    squared = np.add.reduceat(X.data * X.data, X.indptr[:-1]) if X.nnz else np.zeros(0)
    X.data *= np.repeat(1.0 / np.sqrt(squared), np.diff(X.indptr))
    return X


def _planted_margin(X, rng):
    coef = rng.standard_normal(X.shape[1])
    margin = X @ coef
    scale = margin.std()
    if scale > 0:
        margin /= scale
        coef /= scale
    return margin, coef


def _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma, random_state):
    n_samples = check_integer("n_samples", n_samples, low=1)
    n_features = check_integer("n_features", n_features, low=1)
    if not np.isfinite(nnz_per_row) or nnz_per_row < 1:
        raise ValidationError(f"nnz_per_row must be a number >= 1, got {nnz_per_row!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValidationError(f"noise must be a finite number >= 0, got {noise!r}")
    if not (np.isfinite(zipf_offset) and zipf_offset > 0):
        raise ValidationError(f"zipf_offset must be > 0, got {zipf_offset!r}")
    rng = np.random.default_rng(random_state)
    X = _sparse_design(n_samples, n_features, nnz_per_row, zipf_offset, value_sigma, rng)
    margin, coef = _planted_margin(X, rng)
    return X, margin + noise * rng.standard_normal(n_samples), coef


def make_sparse_classification(
    n_samples=10_000,
    n_features=5_000,
    nnz_per_row=50,
    *,
    noise=0.5,
    zipf_offset=20.0,
    value_sigma=0.7,
    random_state=None,
    return_coef=False,
):
    """LIBSVM-like sparse binary classification data with unit-norm rows.

    The generator of ``shared/research/anchors-perf.md`` section 4.1 (with
    ``random_state=0``, 200 000 x 50 000 and ``nnz_per_row=50`` it is the
    ``synth`` benchmark problem):

    * column j (after a random permutation of the column ids) is drawn with
      probability proportional to ``1 / (rank + zipf_offset)`` (Zipf-like, as
      in text data);
    * row lengths are ``1 + Poisson(nnz_per_row - 1)`` draws; a column drawn
      twice in a row is merged, so the mean stored nnz per row is slightly
      below ``nnz_per_row`` (about 49 for 50 at d = 50 000);
    * values are lognormal(0, ``value_sigma``), then every row is scaled to
      unit L2 norm;
    * a planted model ``w* ~ N(0, I)``, margin ``m = X w* / std(X w*)`` and
      ``y = sign(m + noise * N(0, 1))`` in {-1, +1}.

    Privacy: synthetic data, nothing private. Rows have norm exactly 1, so
    they satisfy the row-norm bound of fastdp's mechanisms.

    Parameters
    ----------
    n_samples, n_features : int
    nnz_per_row : float, default=50
        Mean number of column draws per row (before merging repeats).
    noise : float, default=0.5
        Standard deviation of the label noise added to the margin.
    zipf_offset : float, default=20.0
    value_sigma : float, default=0.7
    random_state : None, int or numpy.random.Generator
        Seeds the single ``numpy.random.Generator`` used; same seed, same bits.
    return_coef : bool, default=False
        Also return the planted coefficients (scaled like the margin).

    Returns
    -------
    X : csr_matrix of float64, (n_samples, n_features), int32 indices, unit rows
    y : ndarray of float64 in {-1, +1}
    coef : ndarray of float64, only if ``return_coef``
    """
    X, score, coef = _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma,
                                  random_state)
    y = np.where(score > 0, 1.0, -1.0)
    return (X, y, coef) if return_coef else (X, y)


def make_sparse_regression(
    n_samples=10_000,
    n_features=5_000,
    nnz_per_row=50,
    *,
    noise=0.5,
    zipf_offset=20.0,
    value_sigma=0.7,
    random_state=None,
    return_coef=False,
):
    """LIBSVM-like sparse regression data with unit-norm rows.

    Same design matrix as :func:`make_sparse_classification` (same random
    stream, so the same ``X`` for the same seed), with target
    ``y = m + noise * N(0, 1)`` where ``m = X w* / std(X w*)`` (so ``y`` has
    roughly unit variance plus noise and is centred near 0).

    Privacy: synthetic data, nothing private.

    Returns
    -------
    X : csr_matrix of float64, (n_samples, n_features), int32 indices, unit rows
    y : ndarray of float64
    coef : ndarray of float64, only if ``return_coef``
    """
    X, y, coef = _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma,
                              random_state)
    return (X, y, coef) if return_coef else (X, y)


# --------------------------------------------------------------------------- #
# Real datasets
# --------------------------------------------------------------------------- #

# Public category lists for data-independent one-hot encodings (UCI schema).
_BANK_CATEGORIES = {
    "job": ["admin.", "unknown", "unemployed", "management", "housemaid", "entrepreneur", "student",
            "blue-collar", "self-employed", "retired", "technician", "services"],
    "marital": ["married", "divorced", "single"],
    "education": ["unknown", "secondary", "primary", "tertiary"],
    "default": ["yes", "no"],
    "housing": ["yes", "no"],
    "loan": ["yes", "no"],
    "contact": ["unknown", "telephone", "cellular"],
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "poutcome": ["unknown", "other", "failure", "success"],
}

DATASETS = {
    # name: description used by load_dataset (files relative to the data home)
    "phishing": dict(kind="libsvm", files={"train": "phishing/phishing.bz2"}, n_features=68,
                     task="binary", labels="file 1 (legitimate) -> +1, 0 (phishing) -> -1"),
    "phishing_uci": dict(kind="arff", files={"train": "phishing/phishing_uci.arff.bz2"}, n_features=30,
                         task="binary", labels="Result +1 / -1 as in the file (1 = legitimate)"),
    "a9a": dict(kind="libsvm", files={"train": "a9a/a9a.bz2", "test": "a9a/a9a.t.bz2"}, n_features=123,
                task="binary", labels="+1 (income > 50K) / -1 as in the file"),
    "w8a": dict(kind="libsvm", files={"train": "w8a/w8a.bz2"}, n_features=300, task="binary",
                labels="+1 / -1 as in the file"),
    "mushrooms": dict(kind="libsvm", files={"train": "mushrooms/mushrooms.bz2"}, n_features=112,
                      task="binary", labels="file 1 (poisonous) -> +1, 2 (edible) -> -1"),
    "news20": dict(kind="libsvm", files={"train": "news20/news20.bz2"}, n_features=62061,
                   task="multiclass", labels="classes 1..20 as in the file (float)"),
    "cpusmall": dict(kind="libsvm", files={"train": "cpusmall/cpusmall.bz2"}, n_features=12,
                     task="regression", labels="target usr (%) as in the file"),
    "bank": dict(kind="dat", files={"train": "bank/BANK.dat.bz2"}, n_features=32, task="binary",
                 labels="last column 1 (subscribed) -> +1, 0 -> -1; DP-AGD's unscaled features"),
    "ipums_br": dict(kind="dat", files={"train": "ipums_br/IPUMS-BR.dat.bz2"}, n_features=52,
                     task="binary", labels="last column 1 -> +1, 0 -> -1. Internal reproduction "
                     "data: IPUMS terms forbid redistribution, never copy it"),
    "adult": dict(kind="adult", files={"train": "adult_uci/adult.data.bz2", "test": "adult_uci/adult.test.bz2",
                                       "names": "adult_uci/adult.names.bz2"},
                  n_features=None, task="binary",
                  labels="'>50K' -> +1, '<=50K' -> -1 (the test file's trailing '.' is dropped)"),
    "bank_full": dict(kind="bank_csv", files={"train": "bank/bank-full_commasep.csv.bz2"}, n_features=None,
                      task="binary", labels="y 'yes' -> +1, 'no' -> -1"),
    "abalone": dict(kind="abalone", files={"train": "abalone/abalone.data.bz2"}, n_features=10,
                    task="regression", labels="Rings (integer 1..29) as float"),
    "cal_housing": dict(kind="cal_housing", files={"train": "cal_housing/cal_housing.data.bz2"}, n_features=8,
                        task="regression", labels="medianHouseValue as float"),
}


def dataset_search_paths(data_home=None):
    """Directories searched for the real datasets, in order.

    ``data_home`` if given, else the ``FASTDP_DATA`` environment variable if
    set; then ``../shared/data`` relative to the current directory and to the
    fastdp source checkout (where the project's own machines keep them; a
    clone needs ``FASTDP_DATA``, see docs/your-data.md).
    """
    if data_home is not None:
        return [Path(data_home)]
    paths = []
    if os.environ.get("FASTDP_DATA"):
        paths.append(Path(os.environ["FASTDP_DATA"]))
    paths.append(Path.cwd().parent / "shared" / "data")
    paths.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    unique = []
    for p in paths:
        if p not in unique:
            unique.append(p)
    return unique


def _find_file(relative, data_home, name):
    searched = dataset_search_paths(data_home)
    for root in searched:
        candidate = root / relative
        if candidate.is_file():
            return candidate
    where = ", ".join(str(root / relative) for root in searched)
    raise DatasetNotFoundError(
        f"dataset {name!r}: file not found; looked in {where}. Pass data_home=... or set the "
        "FASTDP_DATA environment variable to your data home: the named datasets are not part "
        "of fastdp; docs/your-data.md says where each comes from and where it goes."
    )


def _text_lines(path):
    with LineChunks(path) as source:
        content = b"".join(bytes(chunk) for chunk in source)
    return content.decode("utf-8").splitlines()


def _map_binary(values, positive, negative, name):
    y = np.where(values == positive, 1.0, -1.0)
    unknown = ~((values == positive) | (values == negative))
    if unknown.any():
        raise ValidationError(f"dataset {name!r}: unexpected label {values[unknown][0]!r}")
    return y


def _load_dense_dat(path, name):
    """Whitespace-separated numbers, label in the last column."""
    lines = [line.split() for line in _text_lines(path) if line.strip()]
    width = len(lines[0])
    if any(len(t) != width for t in lines):
        raise ValidationError(f"dataset {name!r}: rows of different lengths in {path}")
    table = np.array(lines, dtype=np.float64)
    return np.ascontiguousarray(table[:, :-1]), _map_binary(table[:, -1], 1.0, 0.0, name)


def _one_hot(column, categories, name, missing="?"):
    """Data-independent one-hot of a string column; ``missing`` gives a zero row."""
    lookup = {c: k for k, c in enumerate(categories)}
    out = np.zeros((len(column), len(categories)))
    for i, value in enumerate(column):
        if value == missing:
            continue
        if value not in lookup:
            raise ValidationError(f"dataset {name!r}: unknown category {value!r}")
        out[i, lookup[value]] = 1.0
    return out


def _encode_table(rows, schema, name, missing="?"):
    """Numeric columns as float, categorical ones one-hot with public categories."""
    blocks = []
    for col, categories in enumerate(schema):
        column = [r[col] for r in rows]
        if categories is None:
            blocks.append(np.array(column, dtype=np.float64)[:, None])
        else:
            blocks.append(_one_hot(column, categories, name, missing))
    return np.ascontiguousarray(np.hstack(blocks))


def _adult_schema(names_path):
    """Attribute list of adult.names: None for continuous, else the category list."""
    schema = []
    for line in _text_lines(names_path):
        if ":" not in line or line.startswith(("|", " ")):
            continue
        attribute, values = line.split(":", 1)
        values = values.strip().rstrip(".")
        if attribute.strip() == "" or " " in attribute.strip():
            continue
        schema.append(None if values == "continuous" else [v.strip() for v in values.split(",")])
    if len(schema) != 14:
        raise ValidationError(f"adult.names: expected 14 attributes, found {len(schema)}")
    return schema


def _load_adult(files, subset, data_home, name):
    schema = _adult_schema(_find_file(files["names"], data_home, name))
    rows = []
    for line in _text_lines(_find_file(files[subset], data_home, name)):
        if not line.strip() or line.startswith("|"):
            continue
        rows.append([v.strip() for v in line.split(",")])
    labels = np.array([r[14].rstrip(".") for r in rows])
    return _encode_table(rows, schema, name), _map_binary(labels, ">50K", "<=50K", name)


def _load_csv_dataset(kind, path, name):
    lines = [line for line in _text_lines(path) if line.strip()]
    if kind == "arff":
        start = next(k for k, line in enumerate(lines) if line.strip().lower() == "@data") + 1
        table = np.array([line.split(",") for line in lines[start:]], dtype=np.float64)
        return np.ascontiguousarray(table[:, :-1]), _map_binary(table[:, -1], 1.0, -1.0, name)
    rows = [[v.strip() for v in line.split(",")] for line in lines]
    if kind == "bank_csv":
        header, rows = rows[0], rows[1:]
        schema = [_BANK_CATEGORIES.get(column) for column in header[:-1]]
        labels = np.array([r[-1] for r in rows])
        return _encode_table(rows, schema, name), _map_binary(labels, "yes", "no", name)
    if kind == "abalone":
        schema = [["M", "F", "I"]] + [None] * 7
        return _encode_table(rows, schema, name), np.array([r[8] for r in rows], dtype=np.float64)
    if kind == "cal_housing":
        table = np.array(rows, dtype=np.float64)
        return np.ascontiguousarray(table[:, :-1]), table[:, -1].copy()
    raise ValidationError(f"unknown dataset kind {kind!r}")  # pragma: no cover


def _load_binary_dataset(path, dtype):
    X, y = open_binary(path)
    if dtype is not None and np.dtype(dtype) != X.dtype:
        raise ValidationError(
            f"{path} holds {X.dtype} values, not {np.dtype(dtype)}; convert it again with "
            f"dtype={np.dtype(dtype).name} (nothing is converted on opening: that would copy X)")
    return X, y


def load_dataset(name, data_home=None, subset="train", dtype=None, labels="mapped"):
    """Load one of the public real datasets of ``DATASETS`` from the data home.

    The files are not part of fastdp: docs/your-data.md lists where each
    comes from and the name it must have in the data home (``FASTDP_DATA``).

    Privacy: loading releases nothing. The datasets are treated as private
    training data by the solvers; preprocessing decides what is private-safe
    (see :mod:`fastdp.preprocessing`). ``ipums_br`` is internal reproduction
    data (IPUMS terms): load it, never copy it.

    Parameters
    ----------
    name : str or path-like
        A binary dataset directory written by :func:`convert_libsvm`
        (``fastdp convert``; opened memory-mapped by :func:`open_binary`, no
        copy), or one of ``DATASETS``:

        * LIBSVM files (returned as CSR via :func:`load_libsvm`, with the full
          ``n_features`` of the LIBSVM collection, so ``a9a`` test has 123
          columns): ``phishing`` (labels 0/1 mapped to -1/+1), ``a9a``
          (train/test, +-1), ``w8a`` (+-1), ``mushrooms`` (1 = poisonous -> +1,
          2 = edible -> -1), ``news20`` (multiclass 1..20, unchanged),
          ``cpusmall`` (regression).
        * dense ``.dat`` files of DP-AGD (last column 0/1 -> -1/+1, features
          unscaled): ``bank`` (45211 x 32), ``ipums_br`` (38000 x 52).
        * UCI CSV files, encoded without looking at the data (numeric columns
          as they are; categorical columns one-hot over the public category list
          of the UCI description, a missing ``?`` gives an all-zero block):
          ``adult`` (train/test, 105 columns, '>50K' -> +1), ``bank_full``
          (51 columns, 'yes' -> +1), ``abalone`` (Sex one-hot M/F/I + 7
          measurements, target Rings), ``cal_housing`` (8 columns, target
          medianHouseValue), ``phishing_uci`` (the 30 ARFF attributes, Result
          +-1).
    data_home : path, optional
        The data home: a directory holding the files under the names of
        docs/your-data.md (e.g. ``a9a/a9a.bz2``). Default: the ``FASTDP_DATA``
        environment variable, then ``../shared/data`` (see
        :func:`dataset_search_paths`).
    subset : {"train", "test"}, default="train"
        ``"test"`` exists for ``a9a`` and ``adult`` only.
    dtype : {None, numpy.float64, numpy.float32}, default=None
        Value type of X: None means float64 for the named datasets and the
        stored dtype for a binary dataset (asking for another one is an
        error there).  LIBSVM sets are parsed straight into it; the others
        are converted.  float32 halves the memory of X.

    labels : {"mapped", "file"}, default="mapped"
        ``"mapped"``: binary labels -1/+1 as listed above.  ``"file"``
        (LIBSVM datasets only): the labels exactly as the file holds them,
        the labels :func:`load_libsvm` and ``fastdp train FILE`` read from the
        same file (phishing 0/1, mushrooms 1/2).  The command line reads
        ``dataset:NAME`` with ``"file"``, so a LIBSVM dataset has one label
        convention there however it is named.  A fitted classifier's
        ``score`` refuses labels outside its ``classes_``, so mixing the
        two conventions is an error, never a silently wrong accuracy.

    Returns
    -------
    X : csr_matrix (LIBSVM sets) or C-contiguous float64 ndarray (the others)
    y : ndarray of float64

    Raises
    ------
    DatasetNotFoundError
        The file is not in any searched directory; the message lists them.
    ValidationError
        Unknown name or subset, or ``labels="file"`` for a dataset that is
        not a LIBSVM file.
    """
    if is_binary_dataset(name) or str(name).endswith(".fdp"):
        return _load_binary_dataset(name, dtype)
    if name not in DATASETS:
        raise ValidationError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    info = DATASETS[name]
    subsets = [s for s in info["files"] if s in ("train", "test")]
    if subset not in subsets:
        raise ValidationError(f"dataset {name!r} has subsets {subsets}, not {subset!r}")
    kind = info["kind"]
    if labels not in ("mapped", "file"):
        raise ValidationError(f"labels must be 'mapped' or 'file'; got {labels!r}.")
    if labels == "file" and kind != "libsvm":
        raise ValidationError(f"dataset {name!r} is not a LIBSVM file; labels='file' is for "
                              "the LIBSVM datasets only (the others have only mapped labels).")
    dtype = np.dtype(np.float64 if dtype is None else dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValidationError(f"dtype must be float32 or float64; got {dtype}.")
    if kind == "libsvm":
        path = _find_file(info["files"][subset], data_home, name)
        X, y = load_libsvm(path, n_features=info["n_features"], dtype=dtype)
        if labels == "file":
            return X, y
        if name == "phishing":
            y = _map_binary(y, 1.0, 0.0, name)
        elif name == "mushrooms":
            y = _map_binary(y, 1.0, 2.0, name)
        return X, y
    if kind == "adult":
        X, y = _load_adult(info["files"], subset, data_home, name)
    elif kind == "dat":
        X, y = _load_dense_dat(_find_file(info["files"][subset], data_home, name), name)
    else:
        X, y = _load_csv_dataset(kind, _find_file(info["files"][subset], data_home, name), name)
    return (X if dtype == X.dtype else X.astype(dtype)), y

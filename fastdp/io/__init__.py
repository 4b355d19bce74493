"""Reading training data that may be larger than memory.

Public API
----------
load_libsvm
    A LIBSVM / svmlight file (or a byte range of it) as one CSR matrix, equal
    to scikit-learn's ``load_svmlight_file``, with memory ≈ the final CSR.
iter_libsvm_chunks
    The rows of a LIBSVM file in CSR chunks of bounded size.
convert_libsvm, open_binary, is_binary_dataset
    fastdp's on-disk binary CSR (a directory of ``.npy`` arrays and a JSON
    header): convert once in one streaming pass, then open memory-mapped and
    train without copying (``fastdp convert data.svm data.fdp``).
open_binary_rows, binary_shape
    One row range of a binary dataset (a data-parallel worker's shard), and
    its shape from the header alone.

Modules: :mod:`~fastdp.io.libsvm` (the loader), :mod:`~fastdp.io.binary`
(the binary format), and the private pieces they share:
:mod:`~fastdp.io._source` (bytes of a file as whole-line chunks: plain,
compressed, byte ranges), :mod:`~fastdp.io._parse` (CSR arrays filled by the
compiled parser), :mod:`~fastdp.io._growable` (arrays that grow in place),
:mod:`~fastdp.io._npy` (``.npy`` files written by appending).

Privacy: reading and converting data release nothing and spend no privacy
budget.
"""

from fastdp.io.binary import (binary_shape, convert_libsvm, is_binary_dataset, open_binary,
                              open_binary_rows)
from fastdp.io.libsvm import iter_libsvm_chunks, load_libsvm

__all__ = ["load_libsvm", "iter_libsvm_chunks", "convert_libsvm", "open_binary",
           "open_binary_rows", "binary_shape", "is_binary_dataset"]

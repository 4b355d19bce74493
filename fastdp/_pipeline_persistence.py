"""Save and load scikit-learn ``Pipeline`` objects that end in a fastdp estimator.

No pickle: a saved pipeline is plain files any language can read, and loading
one never executes code.

Format (``"format": "fastdp.pipeline"``, ``"version": 1``)
---------------------------------------------------------
``save_model(pipe, "model")`` writes

* ``model.json``: ``{"format": "fastdp.pipeline", "version": 1, "private": true,
  "pipeline_params": {...}, "steps": [...], "final": {...}, "arrays": {...}}``
  where each transformer step is ``{"name", "class", "params", "per_example",
  "n_features_in", "feature_names_in", "fitted": {...}}`` and ``final`` names
  the fastdp estimator's own pair of files with their SHA-256;
* ``model.npz``: the transformers' fitted arrays (empty for per-example steps);
* ``model.final.json`` + ``model.final.npz``: the final estimator, in the
  ordinary model format of :mod:`fastdp.persistence`.

Privacy
-------
The fastdp estimator's ε covers the whole pipeline only when every step before
it is **per-example**: the transformed row depends on that row and on public
parameters only, so the composition is post-processing of a per-example map
(the adjacency is unchanged).  Those steps (``Normalizer``, ``Binarizer``,
``PolynomialFeatures``, ``FunctionTransformer`` with a NumPy ufunc,
``HashingVectorizer``, ``FeatureHasher``) learn nothing from the data but the
number of input features, which is public; they are rebuilt at load by fitting
on an all-zero row.

Scalers fitted on the training data (``StandardScaler``, ``MinMaxScaler``,
``MaxAbsScaler``, ``RobustScaler``) release statistics of that data with no
noise: **they are not private**.  ``save_model`` refuses them unless called with
``allow_non_private=True``; the file then records ``"private": false`` and
:func:`load_pipeline` warns with :class:`~fastdp.preprocessing.NotPrivateWarning`.
Any other step (arbitrary callables, nested pipelines, column transformers) is
refused: it cannot be saved without pickle.

Loading a pipeline from someone else
------------------------------------
Every member is checked before it is built (:mod:`fastdp._pipeline_members`):
at most 64 steps; parameters that are harmful from a file refused (a
``PolynomialFeatures`` degree above 16, ufunc keyword arguments such as
``where=False``, a ufunc of more than one input, a ``HashingVectorizer``
token pattern other than scikit-learn's default or an ``ngram_range`` beyond
16); declared widths integers that chain exactly into the final estimator's
``n_features_in_``; a data-fitted scaler's arrays finite, one per column; every
file a plain regular file in the folder (no link), read in bounded memory and
checked against its SHA-256.  With ``key=`` the pipeline JSON is
authenticated (it holds the SHA-256 of every other file).
"""

from __future__ import annotations

import hashlib
import io
import json
import numbers
import warnings
from pathlib import Path

import numpy as np

import fastdp
from fastdp._model_files import AUTHENTICATION_FIELD, authentication_code, write_atomically
from fastdp._pipeline_members import (MAX_PIPELINE_STEPS, MAX_STEP_FEATURES,
                                      check_data_fitted_arrays,
                                      check_member_params, checked_width, output_width)
from fastdp.exceptions import ValidationError
from fastdp.linear_model._run_size import _available_memory

PIPELINE_FORMAT = "fastdp.pipeline"
PIPELINE_VERSION = 1

#: Steps whose output row depends only on the input row and public parameters.
PER_EXAMPLE_STEPS = {
    "Normalizer": "sklearn.preprocessing",
    "Binarizer": "sklearn.preprocessing",
    "PolynomialFeatures": "sklearn.preprocessing",
    "FunctionTransformer": "sklearn.preprocessing",
    "HashingVectorizer": "sklearn.feature_extraction.text",
    "FeatureHasher": "sklearn.feature_extraction",
}

#: Steps fitted on the data: saved only with ``allow_non_private=True``.
DATA_FITTED_STEPS = {
    "StandardScaler": "sklearn.preprocessing",
    "MinMaxScaler": "sklearn.preprocessing",
    "MaxAbsScaler": "sklearn.preprocessing",
    "RobustScaler": "sklearn.preprocessing",
}

# Steps fitted on the training examples whose input is not a numeric matrix.
_TEXT_INPUT_STEPS = ("HashingVectorizer", "FeatureHasher")


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _step_class(name):
    import importlib

    module = PER_EXAMPLE_STEPS.get(name) or DATA_FITTED_STEPS.get(name)
    return getattr(importlib.import_module(module), name)


# ----------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------
def _encode_param(step, name, value):
    """A JSON value for a transformer parameter (NumPy dtypes and ufuncs by name)."""
    from fastdp.persistence import _jsonable_param

    if isinstance(value, np.ufunc):
        if getattr(np, value.__name__, None) is not value:
            raise ValidationError(f"cannot save {step}.{name}: ufunc {value!r} is not numpy's.")
        return {"numpy_ufunc": value.__name__}
    if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
        return {"numpy_dtype": np.dtype(value).name}
    if callable(value):
        raise ValidationError(
            f"cannot save {step}.{name}={value!r}: a Python callable cannot be stored without "
            "pickle (a NumPy ufunc such as np.log1p can).")
    return _jsonable_param(f"{step}.{name}", value)


def _decode_param(value):
    if isinstance(value, dict) and set(value) == {"numpy_ufunc"}:
        func = getattr(np, str(value["numpy_ufunc"]), None)
        if not isinstance(func, np.ufunc):
            raise ValidationError(f"unknown NumPy ufunc {value['numpy_ufunc']!r} in a pipeline.")
        return func
    if isinstance(value, dict) and set(value) == {"numpy_dtype"}:
        try:
            return np.dtype(str(value["numpy_dtype"])).type
        except TypeError as exc:
            raise ValidationError(f"unknown dtype {value['numpy_dtype']!r} in a pipeline.") \
                from exc
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, list):
        return tuple(_decode_param(v) for v in value)
    return value


# ----------------------------------------------------------------------------
# save
# ----------------------------------------------------------------------------
def _fitted_state(label, step, arrays):
    """JSON scalars of a data-fitted step; its arrays go into ``arrays``."""
    state = {}
    for attr, value in vars(step).items():
        if not attr.endswith("_") or attr.startswith("_") or attr in (
                "n_features_in_", "feature_names_in_"):
            continue
        if isinstance(value, np.ndarray):
            key = f"{label}.{attr}"
            arrays[key] = value
            state[attr] = {"array": key}
        elif isinstance(value, (numbers.Real, np.generic)) and not isinstance(value, bool):
            state[attr] = {"number": int(value) if isinstance(value, numbers.Integral)
                           else float(value)}
        elif value is None:
            state[attr] = {"none": True}
        else:
            raise ValidationError(f"cannot save the fitted attribute {label}.{attr} "
                                  f"({type(value).__name__}).")
    return state


def _step_record(label, step, allow_non_private, arrays):
    cls = type(step).__name__
    per_example = cls in PER_EXAMPLE_STEPS
    if not per_example and cls not in DATA_FITTED_STEPS:
        raise ValidationError(
            f"cannot save pipeline step {label!r} ({cls}): fastdp saves the per-example "
            f"transformers {sorted(PER_EXAMPLE_STEPS)} and, with allow_non_private=True, the "
            f"data-fitted scalers {sorted(DATA_FITTED_STEPS)}.")
    if type(step) is not _step_class(cls):
        raise ValidationError(f"cannot save pipeline step {label!r}: {type(step)!r} is a "
                              f"subclass of scikit-learn's {cls}.")
    if not per_example and not allow_non_private:
        raise ValidationError(
            f"pipeline step {label!r} ({cls}) learnt statistics of the training data with no "
            "noise; saving it releases them, so the model would not be private. Use a "
            "per-example step (e.g. Normalizer) or the estimator's normalize=..., or pass "
            "allow_non_private=True to save it anyway (the file records private: false).")
    names = getattr(step, "feature_names_in_", None)
    return {
        "name": label,
        "class": cls,
        "params": {k: _encode_param(label, k, v)
                   for k, v in step.get_params(deep=False).items()},
        "per_example": per_example,
        "n_features_in": None if cls in _TEXT_INPUT_STEPS else int(step.n_features_in_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "fitted": {} if per_example else _fitted_state(label, step, arrays),
    }


def save_pipeline(pipeline, path, *, allow_non_private=False, key=None):
    """Save a fitted ``Pipeline`` whose last step is a fastdp estimator.

    Parameters
    ----------
    pipeline : sklearn.pipeline.Pipeline
        Fitted; transformer steps from :data:`PER_EXAMPLE_STEPS` (and, with
        ``allow_non_private=True``, :data:`DATA_FITTED_STEPS`); ``"passthrough"``
        steps are kept.
    path : str or os.PathLike
        Base path (see :func:`fastdp.persistence.model_paths`).
    allow_non_private : bool, default=False
        Save scalers fitted on the training data (recorded ``private: false``).
    key : bytes or str, optional
        Authenticate the pipeline's JSON with an HMAC-SHA256 under this
        secret (it holds the SHA-256 of every other file of the pipeline).

    Returns
    -------
    pathlib.Path
        The pipeline's JSON file.
    """
    from fastdp.persistence import model_paths, save_model

    if pipeline.memory is not None:
        raise ValidationError("cannot save a Pipeline with memory=...: set memory=None first.")
    if not pipeline.steps:
        raise ValidationError("cannot save an empty Pipeline.")
    json_path, npz_path = model_paths(path)
    final_name, final = pipeline.steps[-1]
    final_json = json_path.with_name(json_path.stem + ".final.json")
    arrays, steps = {}, []
    for label, step in pipeline.steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            steps.append({"name": label, "class": "passthrough"})
        else:
            steps.append(_step_record(label, step, allow_non_private, arrays))
    save_model(final, final_json)  # validates the estimator (fastdp, fitted)
    _, final_npz = model_paths(final_json)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    private = all(s["class"] == "passthrough" or s["per_example"] for s in steps)
    metadata = {
        "format": PIPELINE_FORMAT,
        "version": PIPELINE_VERSION,
        "fastdp_version": fastdp.__version__,
        "private": private,
        "pipeline_params": {"verbose": bool(pipeline.verbose)},
        "steps": steps,
        "final": {"name": final_name, "file": final_json.name,
                  "sha256": _sha256(final_json.read_bytes()),
                  "npz_sha256": _sha256(final_npz.read_bytes())},
        "arrays": {"file": npz_path.name, "sha256": _sha256(payload), "names": sorted(arrays)},
    }
    if key is not None:
        metadata[AUTHENTICATION_FIELD] = {"hmac_sha256": authentication_code(metadata, key)}
    write_atomically(npz_path, payload)
    write_atomically(json_path, (json.dumps(metadata, indent=1, allow_nan=False) + "\n")
                     .encode("utf-8"))
    return json_path


# ----------------------------------------------------------------------------
# load
# ----------------------------------------------------------------------------
def _sibling(json_path, name, what):
    """A file named in the pipeline JSON: a plain regular file in the same folder (no link)."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise ValidationError(f"{json_path}: {what} must be a plain file name in the same folder, "
                              f"got {str(name)[:80]!r}.")
    path = json_path.with_name(name)
    if path.is_symlink() or not path.is_file():
        raise ValidationError(f"{json_path}: its {what} {path} is missing, a link or not a "
                              "regular file; keep the pipeline's files together.")
    return path


def _read_sibling(json_path, name, what, sha256):
    """The bytes of a member file, bounded and checked against the SHA-256 the JSON states."""
    from fastdp.persistence import _read_array_file

    path = _sibling(json_path, name, what)
    payload = _read_array_file(path)  # a regular file, no link followed, bounded by memory
    if _sha256(payload) != sha256:
        raise ValidationError(f"{path} does not match {json_path} (SHA-256 differs).")
    return path, payload


def _decoded_params(where, record):
    params = record["params"]
    if not isinstance(params, dict):
        raise ValidationError(f"{where}: params must be a JSON object.")
    return {str(k): _decode_param(v) for k, v in params.items()}


def _rebuild_step(json_path, record, arrays, width):
    """The step of ``record`` for ``width`` input columns (None: not known yet), and its
    output width; every parameter checked first (:mod:`fastdp._pipeline_members`)."""
    if not isinstance(record, dict):
        raise ValidationError(f"{json_path}: a step must be a JSON object.")
    cls_name = record["class"]
    if cls_name == "passthrough":
        return "passthrough", width
    if cls_name not in PER_EXAMPLE_STEPS and cls_name not in DATA_FITTED_STEPS:
        raise ValidationError(f"{json_path}: unknown pipeline step class {str(cls_name)[:80]!r}.")
    where = f"{json_path}: step {str(record['name'])[:80]!r} ({cls_name})"
    per_example = cls_name in PER_EXAMPLE_STEPS
    if record.get("per_example") is not per_example:
        raise ValidationError(f"{where} has the wrong privacy class (per_example must be "
                              f"{str(per_example).lower()}).")
    params = _decoded_params(where, record)
    check_member_params(where, cls_name, params)
    try:
        step = _step_class(cls_name)(**params)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where}: parameters do not fit {cls_name}: {exc}") from exc
    if cls_name in _TEXT_INPUT_STEPS:
        if width is not None:
            raise ValidationError(f"{where}: a text step must come first.")
        _fit_step(where, step, [])  # stateless: fit only validates the parameters
        d = None
    else:
        d = checked_width(where, record["n_features_in"])
        if width is not None and d != width:
            raise ValidationError(f"{where} takes {d} features; the step before outputs "
                                  f"{width}.")
        memory = _available_memory()
        if memory is not None and 8 * d > memory // 4:
            raise ValidationError(f"{where}: n_features_in {d} is more than this machine can "
                                  "hold as one row.")
        if per_example:
            _fit_step(where, step, np.zeros((1, d)))  # learns the number of features only
        else:
            _set_fitted(where, step, record["fitted"], arrays)
            step.n_features_in_ = d
            check_data_fitted_arrays(where, step, d)
    if record.get("feature_names_in") is not None:
        names = record["feature_names_in"]
        if not isinstance(names, list) or len(names) != d or not all(
                isinstance(n, str) for n in names):
            raise ValidationError(f"{where}: feature_names_in must be {d} strings.")
        step.feature_names_in_ = np.asarray(names, dtype=object)
    return step, output_width(cls_name, step, d)


def _fit_step(where, step, X):
    try:
        step.fit(X)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where}: parameters do not fit: {exc}") from exc


def _set_fitted(where, step, fitted, arrays):
    """A data-fitted step's saved attributes (names ending in ``_`` only)."""
    if not isinstance(fitted, dict):
        raise ValidationError(f"{where}: fitted must be a JSON object.")
    for attr, value in fitted.items():
        if not (isinstance(attr, str) and attr.endswith("_") and attr.isidentifier()
                and not attr.startswith("_")) or not isinstance(value, dict):
            raise ValidationError(f"{where}: invalid fitted attribute {str(attr)[:80]!r}.")
        if "array" in value:
            if value["array"] not in arrays:
                raise ValidationError(f"{where}: missing array {str(value['array'])[:80]!r}.")
            setattr(step, attr, arrays[value["array"]])
        elif "number" in value:
            number = value["number"]
            if isinstance(number, bool) or not isinstance(number, numbers.Real):
                raise ValidationError(f"{where}: {attr} must be a number.")
            setattr(step, attr, number)
        else:
            setattr(step, attr, None)


def _referenced_arrays(steps):
    """Names of the arrays the steps' fitted attributes refer to (each numeric)."""
    names = {}
    for record in steps:
        fitted = record.get("fitted") if isinstance(record, dict) else None
        for value in (fitted.values() if isinstance(fitted, dict) else ()):
            if isinstance(value, dict) and isinstance(value.get("array"), str):
                names[value["array"]] = "biuf"
    return names


def load_pipeline(json_path, data):
    """Rebuild a pipeline from its validated JSON ``data`` (see the module docstring).

    Every member is checked before it is built (:mod:`fastdp._pipeline_members`):
    at most :data:`~fastdp._pipeline_members.MAX_PIPELINE_STEPS` steps, harmless
    parameters, widths chaining into the final estimator, array files read in
    bounded memory.

    Returns
    -------
    sklearn.pipeline.Pipeline
        With ``model_metadata_`` (the pipeline JSON) and ``private_`` (bool).
    """
    from sklearn.pipeline import Pipeline

    from fastdp.persistence import _load_model, _read_arrays, model_paths
    from fastdp.preprocessing import NotPrivateWarning

    if data.get("version") != PIPELINE_VERSION:
        raise ValidationError(f"{json_path} has pipeline format version "
                              f"{str(data.get('version'))[:40]!r}; this fastdp reads version "
                              f"{PIPELINE_VERSION}.")
    records, final = data["steps"], data["final"]
    if not isinstance(records, list) or len(records) > MAX_PIPELINE_STEPS:
        raise ValidationError(f"{json_path}: steps must be a list of at most "
                              f"{MAX_PIPELINE_STEPS} steps.")
    final_json, _ = _read_sibling(json_path, final["file"], "final estimator file",
                                  final["sha256"])
    if not final_json.name.endswith(".json"):
        raise ValidationError(f"{json_path}: the final estimator file must be a .json file.")
    npz_path, payload = _read_sibling(json_path, data["arrays"]["file"], "array file",
                                      data["arrays"]["sha256"])
    # a scaler's arrays hold one number per input column of its step
    widths = [r.get("n_features_in") for r in records if isinstance(r, dict)]
    widest = max([w for w in widths if isinstance(w, int) and not isinstance(w, bool)
                  and 0 < w <= MAX_STEP_FEATURES] or [0])
    arrays = _read_arrays(npz_path, payload, _referenced_arrays(records),
                          max_member_bytes=4096 + 8 * widest)
    estimator = _load_model(final_json)
    _, final_npz = model_paths(final_json)
    _read_sibling(json_path, final_npz.name, "final estimator's array file", final["npz_sha256"])
    steps, width = [], None
    for record in records:
        step, width = _rebuild_step(json_path, record, arrays, width)
        steps.append((str(record["name"]), step))
    if width is not None and width != estimator.n_features_in_:
        raise ValidationError(f"{json_path}: the steps output {width} features; the final "
                              f"estimator takes {estimator.n_features_in_}.")
    private = all(r["class"] == "passthrough" or r["per_example"] for r in records)
    if data.get("private") is not private:
        raise ValidationError(f"{json_path}: 'private' does not match its steps.")
    if not private:
        warnings.warn(f"{json_path} holds scalers fitted on the training data without noise: the "
                      "pipeline is not private (only its final estimator is).", NotPrivateWarning,
                      stacklevel=3)
    pipeline = Pipeline(steps + [(str(final["name"]), estimator)],
                        verbose=bool(data["pipeline_params"].get("verbose", False)))
    pipeline.model_metadata_ = data
    pipeline.private_ = private
    return pipeline

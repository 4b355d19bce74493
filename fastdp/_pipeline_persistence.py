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
from fastdp.exceptions import ValidationError

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
    """A file named in the pipeline JSON: a plain file in the same folder."""
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValidationError(f"{json_path}: {what} must be a file name in the same folder, "
                              f"got {name!r}.")
    path = json_path.with_name(name)
    if path.is_symlink() or not path.is_file():
        raise ValidationError(f"{json_path}: its {what} {path} is missing (or a link); keep the "
                              "pipeline's files together.")
    return path


def _rebuild_step(json_path, record, arrays):
    cls_name = record["class"]
    if cls_name == "passthrough":
        return "passthrough"
    if cls_name not in PER_EXAMPLE_STEPS and cls_name not in DATA_FITTED_STEPS:
        raise ValidationError(f"{json_path}: unknown pipeline step class {cls_name!r}.")
    cls = _step_class(cls_name)
    try:
        step = cls(**{k: _decode_param(v) for k, v in record["params"].items()})
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{json_path}: parameters do not fit {cls_name}: {exc}") from exc
    per_example = cls_name in PER_EXAMPLE_STEPS
    if bool(record.get("per_example")) != per_example:
        raise ValidationError(f"{json_path}: step {record['name']!r} has the wrong privacy class.")
    if cls_name in _TEXT_INPUT_STEPS:
        step.fit([])  # stateless: fit only validates the parameters
    else:
        d = int(record["n_features_in"])
        if d < 1:
            raise ValidationError(f"{json_path}: step {record['name']!r} has {d} features.")
        if per_example:
            step.fit(np.zeros((1, d)))  # learns the number of features only
        else:
            for attr, value in record["fitted"].items():
                if "array" in value:
                    if value["array"] not in arrays:
                        raise ValidationError(f"{json_path}: missing array {value['array']!r}.")
                    setattr(step, attr, arrays[value["array"]])
                elif "number" in value:
                    setattr(step, attr, value["number"])
                else:
                    setattr(step, attr, None)
            step.n_features_in_ = d
    if record.get("feature_names_in") is not None:
        step.feature_names_in_ = np.asarray(record["feature_names_in"], dtype=object)
    return step


def load_pipeline(json_path, data):
    """Rebuild a pipeline from its validated JSON ``data`` (see the module docstring).

    Returns
    -------
    sklearn.pipeline.Pipeline
        With ``model_metadata_`` (the pipeline JSON) and ``private_`` (bool).
    """
    from sklearn.pipeline import Pipeline

    from fastdp.persistence import load_model, model_paths
    from fastdp.preprocessing import NotPrivateWarning

    if data.get("version") != PIPELINE_VERSION:
        raise ValidationError(f"{json_path} has pipeline format version {data.get('version')!r};"
                              f" this fastdp reads version {PIPELINE_VERSION}.")
    final = data["final"]
    final_json = _sibling(json_path, final["file"], "final estimator file")
    if _sha256(final_json.read_bytes()) != final["sha256"]:
        raise ValidationError(f"{final_json} does not match {json_path} (SHA-256 differs).")
    npz_path = _sibling(json_path, data["arrays"]["file"], "array file")
    payload = npz_path.read_bytes()
    if _sha256(payload) != data["arrays"]["sha256"]:
        raise ValidationError(f"{npz_path} does not match {json_path} (SHA-256 differs).")
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except ValueError as exc:
        raise ValidationError(f"{npz_path}: unreadable arrays ({exc}).") from exc
    estimator = load_model(final_json)
    _, final_npz = model_paths(final_json)
    if _sha256(final_npz.read_bytes()) != final["npz_sha256"]:
        raise ValidationError(f"{final_npz} does not match {json_path} (SHA-256 differs).")
    steps = [(r["name"], _rebuild_step(json_path, r, arrays)) for r in data["steps"]]
    private = all(r["class"] == "passthrough" or r["per_example"] for r in data["steps"])
    if bool(data.get("private")) != private:
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

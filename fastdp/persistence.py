"""Save and load fitted fastdp estimators: JSON metadata plus an ``.npz`` of arrays.

No pickle anywhere: a saved model is two plain files that any language can
read, and loading one never executes code.

Format (``"format": "fastdp.model"``, ``"version": 1``)
------------------------------------------------------
``save_model(est, "model")`` writes

* ``model.npz``: the arrays, written with :func:`numpy.savez` and read back
  with ``allow_pickle=False``: ``coef`` (float64), ``intercept`` (float64)
  and, for classifiers, ``classes`` (numbers or unicode strings);
* ``model.json`` (UTF-8)::

    {"format": "fastdp.model", "version": 1,
     "fastdp_version": "0.1.0", "created_utc": "2026-01-01T12:00:00Z",
     "estimator": "DPLogisticRegression",          # class in fastdp.linear_model
     "params": {...},                                # get_params(); ledger and engine stored as null
     "privacy": {"epsilon": 0.99, "delta": 1e-05,   # epsilon_ / delta_ ("inf" if not private)
                 "noise_multiplier": 3.1, "noise_name": "noise_multiplier",
                 "accountant": "rdp", "event": {...DpEvent.to_dict()...},
                 "report": {"epsilon_guaranteed": ..., "epsilon_if_poisson_assumed": null,
                            "delta": ..., "accountant": "rdp", "adjacency": "add_remove"},
                 "sampler": "poisson", "sample_rate": 0.03, "clip": 1.0, "n_iter": 310,
                 "seed": 0},                         # random_state if it was an int, else null
     "fit": {"n_features_in": 68, "feature_names_in": null, "fit_time": 0.2,
             "row_map": {"bound": "normalize", "fit_intercept": true,
                         "intercept_scaling": 1.0},       # applied again at prediction
             "solver": "dpsgd", "multi_class": null},     # "multinomial"/"ovr" for K > 2
     "arrays": {"file": "model.npz", "sha256": "...", "names": ["coef", "intercept", "classes"]}}

Non-finite numbers are written as the strings ``"inf"``, ``"-inf"``,
``"nan"`` (JSON has no literal for them).  The ``.npz`` is referred to by its
file name relative to the JSON file, and its SHA-256 is checked on load, so the
two files travel together and a mismatched pair is refused.

Loading a file from someone else
--------------------------------
:func:`load_model` treats both files as hostile: the array file must be a
plain ``.npz`` file name in the JSON's folder (no path, and no symbolic link
resolving out of the folder, which is never followed); the archive may hold
only ``coef``, ``intercept`` and ``classes``, each a numeric (or, for
``classes``, unicode) ``.npy`` whose header must describe exactly the bytes
stored (a header claiming 745 GiB in a 200-byte file is refused before any
allocation); nothing is unpickled.  Every such problem is one
:class:`~fastdp.exceptions.ValidationError` naming the file.

Privacy
-------
A saved model holds only what the fit released (``coef_``, the intercept,
the classes) and public metadata: the privacy event, ε, δ, σ, the settings.
It deliberately leaves out ``history_`` and ``solver_result_`` (non-private
diagnostics and internal state such as the dual variables, which the event
does not cover).  Saving and loading are post-processing: no privacy cost.
The seed is stored for reproducibility; anyone holding the seed *and* the
training data could replay the noise, so treat a model file with a seed as
you would treat the seed.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import math
import numbers
import os
import stat
import zipfile
from pathlib import Path

import numpy as np

import fastdp
from fastdp.exceptions import ValidationError
from fastdp._model_files import (AUTHENTICATION_FIELD, authentication_code,
                                 check_authentication, read_json_file, write_atomically)
from fastdp.io._npy import read_npy_header
from fastdp.privacy.accountants import EpsilonReport
from fastdp.privacy.events import Adjacency, event_from_dict

__all__ = ["save_model", "load_model", "model_paths", "read_model_metadata",
           "MODEL_FORMAT", "MODEL_VERSION"]

MODEL_FORMAT = "fastdp.model"
MODEL_VERSION = 2
_READABLE_VERSIONS = (1, 2)

_ARRAY_NAMES = ("coef", "intercept", "classes")


def _estimator_classes():
    from fastdp import linear_model

    return {name: getattr(linear_model, name) for name in linear_model.__all__}


def model_paths(path):
    """``(json_path, npz_path)`` for a model base path.

    ``"model"``, ``"model.json"`` and ``"model.npz"`` all name the pair
    ``model.json`` + ``model.npz``.
    """
    path = Path(os.fspath(path))
    if path.suffix in (".json", ".npz"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".json"), path.with_name(path.name + ".npz")


# ----------------------------------------------------------------------------
# JSON helpers
# ----------------------------------------------------------------------------
def _number(value):
    """A float for JSON, with non-finite values as strings."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _from_number(value, what):
    if value is None:
        return None
    if isinstance(value, str):
        if value in ("inf", "-inf", "nan"):
            return float(value)
        raise ValidationError(f"model file: {what} must be a number, got {value!r}.")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(f"model file: {what} must be a number, got {value!r}.")
    return float(value)


def _jsonable_param(name, value):
    """A JSON value for an estimator parameter (or raise with what to do)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _number(value)
    if isinstance(value, dict):
        return {str(k): _jsonable_param(f"{name}[{k!r}]", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable_param(name, v) for v in value]
    raise ValidationError(
        f"cannot save parameter {name}={value!r} ({type(value).__name__}) as JSON; set it to a "
        "number, string or None before saving (an accountant instance: use its name).")


def _params_for_file(estimator):
    params = {}
    for name, value in estimator.get_params(deep=False).items():
        if name == "ledger":
            params[name] = None  # a ledger is a live budget, not part of the model
        elif name == "engine":
            params[name] = None  # where a fit runs (a cluster), not part of the model
        elif name == "random_state" and not (value is None or isinstance(value, numbers.Integral)):
            params[name] = None  # a Generator's state is not stored; the seed field says so
        else:
            params[name] = _jsonable_param(name, value)
    return params


def _params_from_file(params):
    out = {}
    for name, value in params.items():
        if isinstance(value, str) and value in ("inf", "-inf", "nan") and name != "solver":
            value = float(value)
        elif isinstance(value, dict):
            value = _params_from_file(value)
        out[name] = value
    return out


def _report_to_dict(report):
    if report is None:
        return None
    return {"epsilon_guaranteed": _number(report.epsilon_guaranteed),
            "epsilon_if_poisson_assumed": _number(report.epsilon_if_poisson_assumed),
            "delta": _number(report.delta), "accountant": report.accountant,
            "adjacency": None if report.adjacency is None else report.adjacency.value}


def _report_from_dict(data):
    if data is None:
        return None
    try:
        adjacency = None if data["adjacency"] is None else Adjacency(data["adjacency"])
        return EpsilonReport(_from_number(data["epsilon_guaranteed"], "report epsilon"),
                             _from_number(data["epsilon_if_poisson_assumed"], "report what-if"),
                             _from_number(data["delta"], "report delta"),
                             str(data["accountant"]), adjacency)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"model file: invalid privacy report {data!r}: {exc}") from exc


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------
# save
# ----------------------------------------------------------------------------
def save_model(estimator, path, *, allow_non_private=False, key=None):
    """Save a fitted fastdp estimator as ``PATH.json`` + ``PATH.npz``.

    Parameters
    ----------
    estimator : DPRidge, DPLogisticRegression, DPLinearSVC or Pipeline
        Fitted (has ``coef_``).  A scikit-learn ``Pipeline`` ending in one of
        them is saved by :func:`fastdp._pipeline_persistence.save_pipeline`
        (per-example transformers; scalers fitted on the data only with
        ``allow_non_private=True``).
    path : str or os.PathLike
        Base path; a ``.json`` or ``.npz`` suffix is dropped.  Missing parent
        directories are created; existing files are replaced.
    allow_non_private : bool, default=False
        Pipelines only: also save steps fitted on the training data without
        noise (the file records that the pipeline is not private).
    key : bytes or str, optional
        A secret: the JSON then holds an HMAC-SHA256 of its metadata (which
        holds the SHA-256 of the arrays), checked by ``load_model(..., key=)``.
        Without it the file is only as trustworthy as wherever it was kept
        (module docstring, "Trust").

    Returns
    -------
    pathlib.Path
        The JSON file (pass it, or the base path, to :func:`load_model`).

    Notes
    -----
    Privacy: stores the released model and public metadata only (see the
    module docstring); ``history_`` and ``solver_result_`` are not saved.
    Both files are written beside their targets and renamed over them, so a
    failed save (a full disk) leaves a previous model at ``path`` loadable.
    """
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        from fastdp._pipeline_persistence import save_pipeline

        Path(os.fspath(path)).parent.mkdir(parents=True, exist_ok=True)
        return save_pipeline(estimator, path, allow_non_private=allow_non_private, key=key)
    classes = _estimator_classes()
    name = type(estimator).__name__
    if name not in classes or type(estimator) is not classes[name]:
        raise ValidationError(
            f"save_model saves fastdp estimators ({', '.join(sorted(classes))}); got {name}.")
    if not hasattr(estimator, "coef_"):
        raise ValidationError(f"this {name} is not fitted yet; call fit(X, y) before saving.")
    json_path, npz_path = model_paths(path)
    json_path.parent.mkdir(parents=True, exist_ok=True)

    arrays = {"coef": np.asarray(estimator.coef_, dtype=np.float64),
              "intercept": np.atleast_1d(np.asarray(estimator.intercept_, dtype=np.float64))}
    if hasattr(estimator, "classes_"):
        labels = np.asarray(estimator.classes_)
        if labels.dtype == object:
            labels = labels.astype(str)
        arrays["classes"] = labels
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()

    seed = estimator.random_state if isinstance(estimator.random_state, numbers.Integral) \
        and not isinstance(estimator.random_state, bool) else None
    accountant = estimator.accountant if isinstance(estimator.accountant, str) else getattr(
        estimator.accountant, "name", type(estimator.accountant).__name__)
    feature_names = getattr(estimator, "feature_names_in_", None)
    metadata = {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "fastdp_version": fastdp.__version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "estimator": name,
        "params": _params_for_file(estimator),
        "privacy": {
            "epsilon": _number(estimator.epsilon_),
            "delta": _number(estimator.delta_),
            "noise_multiplier": _number(estimator.noise_multiplier_),
            "noise_name": getattr(estimator, "noise_name_", "noise_multiplier"),
            "accountant": accountant,
            "event": estimator.privacy_event_.to_dict(),
            "report": _report_to_dict(estimator.privacy_report_),
            "sampler": estimator.sampler_,
            "sample_rate": _number(estimator.sample_rate_),
            "clip": _number(estimator.clip_),
            "n_iter": int(estimator.n_iter_),
            "seed": None if seed is None else int(seed),
        },
        "fit": {
            "n_features_in": int(estimator.n_features_in_),
            "feature_names_in": None if feature_names is None else [str(f) for f in feature_names],
            "fit_time": _number(getattr(estimator, "fit_time_", None)),
            "row_map": estimator.row_map_.to_dict(),
            "solver": getattr(estimator, "solver_", None),
            "multi_class": getattr(estimator, "multi_class_", None),
        },
        "arrays": {"file": npz_path.name, "sha256": _sha256(payload), "names": sorted(arrays)},
    }
    if key is not None:
        metadata[AUTHENTICATION_FIELD] = {"hmac_sha256": authentication_code(metadata, key)}
    text = json.dumps(metadata, indent=1, allow_nan=False)
    # both written completely beside their targets before either is renamed
    # over them: a full disk leaves the previous pair untouched
    write_atomically(npz_path, payload)
    write_atomically(json_path, (text + "\n").encode("utf-8"))
    return json_path


# ----------------------------------------------------------------------------
# load
# ----------------------------------------------------------------------------
def _read_json(json_path):
    """The JSON of a model file: a regular file, bounded in size (never a FIFO or device)."""
    if not os.path.lexists(json_path):
        raise ValidationError(f"no fastdp model at {json_path} (expected the file written by "
                              "save_model / 'fastdp train --out').")
    return read_json_file(json_path, "model file")


def read_model_metadata(path, data=None):
    """The validated JSON metadata of a saved model (nothing is unpickled or run)."""
    json_path, _ = model_paths(path)
    if data is None:
        data = _read_json(json_path)
    required = {"format", "version", "estimator", "params", "privacy", "fit", "arrays"}
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT or not required <= set(data):
        raise ValidationError(f"{json_path} is not a fastdp model file.")
    if data["version"] not in _READABLE_VERSIONS:
        raise ValidationError(f"{json_path} has model format version {data['version']!r}; this "
                              f"fastdp reads versions {list(_READABLE_VERSIONS)}.")
    for key in ("params", "privacy", "fit", "arrays"):
        if not isinstance(data[key], dict):
            raise ValidationError(f"{json_path}: '{key}' must be a JSON object.")
    return data


def _array_file(json_path, name):
    """The ``.npz`` a model's JSON names: a plain file name in the JSON's folder.

    Refused: anything but a plain ``*.npz`` name (a path, ``..``, an absolute
    name), a missing file, and a name that resolves (through symbolic links)
    to a file outside the folder.
    """
    if (not isinstance(name, str) or not name.endswith(".npz")
            or os.path.basename(name) != name or "/" in name or "\\" in name):
        raise ValidationError(
            f"{json_path}: the array file {name!r} must be a plain '.npz' file name in the "
            "model's folder (no directories): not a file written by save_model.")
    npz_path = json_path.parent / name
    try:
        real = npz_path.resolve(strict=True)
        folder = json_path.parent.resolve(strict=True)
    except (OSError, RuntimeError):
        real = folder = None
    if real is None or not real.is_file():
        raise ValidationError(f"{json_path}: its array file {npz_path} is missing; keep the .json "
                              "and .npz files together.")
    if real.parent != folder:
        raise ValidationError(
            f"{npz_path} is a link to {real}, outside the model's folder {folder}; a model's "
            "array file must be a regular file beside its .json (links out are not followed).")
    return real


def _read_array_file(npz_path):
    """The bytes of ``npz_path`` (a resolved path), never through a link, bounded in size."""
    from fastdp.linear_model import _available_memory

    try:
        fd = os.open(npz_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ValidationError(f"{npz_path}: cannot be read ({exc.strerror}).") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValidationError(f"{npz_path} is not a regular file.")
        memory = _available_memory()
        if memory is not None and info.st_size > memory // 4:
            raise ValidationError(f"{npz_path} is {info.st_size / 2**30:.1f} GiB, more than this "
                                  "machine can load as a model.")
        return handle.read(info.st_size + 1)


#: dtype kinds an array of a saved model may have.
_ARRAY_KINDS = {"coef": "f", "intercept": "f", "classes": "biufU"}
#: Largest ratio of a deflated zip member's size to its compressed size (deflate's
#: limit is about 1032); a member claiming more is corrupt or a zip bomb.
_MAX_DEFLATE_RATIO = 1100


def _read_arrays(npz_path, payload, kinds=None, max_member_bytes=None):
    """The arrays of a model's ``.npz``, checked before anything is allocated.

    Each member must be ``coef.npy``, ``intercept.npy`` or ``classes.npy``
    (once), of a numeric (``classes``: also unicode) dtype, and its ``.npy``
    header must describe exactly the bytes the member holds; the data are then
    read from those bytes (no pickle, no allocation the file does not back).
    ``kinds`` maps each allowed member name (without ``.npy``) to its allowed
    dtype kinds (default: a model's ``coef``, ``intercept`` and ``classes``).
    A member may not unpack to more than ``max_member_bytes`` (when given),
    nor to more than a quarter of the memory this process may allocate.
    """
    from fastdp.linear_model import _available_memory

    kinds = _ARRAY_KINDS if kinds is None else kinds
    memory = _available_memory()
    bound = min(math.inf if max_member_bytes is None else max_member_bytes,
                math.inf if memory is None else memory // 4)
    def refuse(why):
        raise ValidationError(f"{npz_path}: unreadable arrays ({why}); not a file written by "
                              "save_model.")

    arrays = {}
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            for member in archive.infolist():
                name = member.filename[:-4] if member.filename.endswith(".npy") else None
                if name not in kinds or name in arrays:
                    refuse(f"unexpected member {member.filename!r}")
                limit = len(payload) * (1 if member.compress_type == zipfile.ZIP_STORED
                                        else _MAX_DEFLATE_RATIO)
                if member.file_size > min(limit, bound):
                    refuse(f"member {member.filename!r} claims {member.file_size} bytes")
                arrays[name] = _npy_array(archive.read(member), name, kinds[name], refuse)
    except ValidationError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError,
            NotImplementedError, RuntimeError, KeyError) as exc:
        refuse(exc)
    return arrays


def _npy_array(data, name, kinds, refuse):
    """A ``.npy`` member's array, its header checked against its length first."""
    handle = io.BytesIO(data)
    try:
        shape, fortran, dtype = read_npy_header(handle)
    except ValueError as exc:
        refuse(f"{name}: {exc}")
    if dtype.hasobject or dtype.kind not in kinds or dtype.subdtype is not None:
        refuse(f"{name}: dtype {dtype} is not allowed")
    count = math.prod(int(n) for n in shape)
    claimed = count * dtype.itemsize
    if claimed != len(data) - handle.tell():
        refuse(f"{name}: the header claims {claimed} bytes ({shape} of {dtype}); the file "
               f"holds {len(data) - handle.tell()}")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=handle.tell())
    return flat.reshape(shape, order="F" if fortran else "C").copy()


def _row_map_from_file(json_path, data):
    """The saved row map; version-1 files (no intercept) had normalise-or-reject rows."""
    from fastdp.preprocessing import RowMap

    saved = data["fit"].get("row_map")
    try:
        if saved is None:
            normalize = data["params"].get("normalize") is True
            return RowMap("normalize" if normalize else "reject", False, 1.0)
        return RowMap(bound=saved["bound"], fit_intercept=bool(saved["fit_intercept"]),
                      intercept_scaling=float(saved["intercept_scaling"]))
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise ValidationError(f"{json_path}: invalid row map {saved!r}: {exc}") from exc


def _check_shapes(json_path, name, coef, intercept, classes):
    """coef, intercept and classes must describe one model."""
    if name == "DPRidge":
        ok = coef.ndim == 1 and intercept.shape == (1,)
    else:
        k = 0 if classes is None else classes.shape[0]
        rows = 1 if k == 2 else k
        ok = (classes is not None and classes.ndim == 1 and k >= 2
              and len(np.unique(classes)) == k and coef.ndim == 2
              and coef.shape[0] == rows and intercept.shape == (rows,))
    if not ok:
        raise ValidationError(
            f"{json_path}: inconsistent arrays (coef {coef.shape}, intercept {intercept.shape}, "
            f"classes {None if classes is None else classes.shape}).")


def _checked_epsilon(json_path, privacy, event, delta):
    """epsilon recomputed from the saved event (never trusted from the file).

    The JSON's ``epsilon`` must agree with the accountant's epsilon of the
    saved ``event`` at the saved ``delta`` (to 1e-9 relative); a file whose
    number was edited is refused.
    """
    from fastdp.privacy.accountants import get_accountant
    from fastdp.privacy.events import NonPrivateEvent

    stored = _from_number(privacy["epsilon"], "epsilon")
    if isinstance(event, NonPrivateEvent):
        if not math.isinf(stored):
            raise ValidationError(f"{json_path}: a non-private event with epsilon {stored}.")
        return math.inf
    try:
        accountant = get_accountant(privacy.get("accountant", "rdp"))
        computed = float(accountant.epsilon(event, delta))
    except (ValidationError, ValueError, TypeError) as exc:
        raise ValidationError(f"{json_path}: cannot recompute epsilon from the saved event: "
                              f"{exc}") from exc
    if not math.isclose(computed, stored, rel_tol=1e-9, abs_tol=1e-12):
        raise ValidationError(
            f"{json_path}: the stored epsilon {stored!r} is not the accountant's epsilon "
            f"{computed!r} of the stored event: the file was modified.")
    return computed


def _recomputed_report(json_path, privacy, event, delta):
    """The privacy report of the saved event at the saved delta (None if not private)."""
    from fastdp.privacy.accountants import get_accountant
    from fastdp.privacy.events import NonPrivateEvent

    if isinstance(event, NonPrivateEvent):
        return None
    try:
        return get_accountant(privacy.get("accountant", "rdp")).report(event, delta)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ValidationError(f"{json_path}: cannot recompute the privacy report from the saved "
                              f"event: {exc}") from exc


def _count(json_path, value, what):
    """A non-negative int field of the JSON (an int, or a float holding an int)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value >= 0 and value == int(value)):
        raise ValidationError(f"{json_path}: {what} must be a non-negative integer; got "
                              f"{str(value)[:40]}.")
    return int(value)


def _checked_classes(npz_path, classes):
    """Saved class labels: finite numbers or strings, each once."""
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        raise ValidationError(f"{npz_path}: non-finite class labels; not a usable model.")
    return classes


def load_model(path, *, key=None):
    """Load an estimator saved by :func:`save_model` (see :func:`_load_model`).

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file, the ``.npz`` file or their common base path.
    key : bytes or str, optional
        The secret given to ``save_model(..., key=)``: the file's HMAC must
        verify under it, or the load is refused.  Without a key nothing is
        authenticated: a saved model is only as trustworthy as its file
        (a consistent forgery of its privacy event loads; module docstring).

    Any missing or malformed field of the JSON is one :class:`ValidationError`
    naming the file and the field.  A file written for a ``Pipeline`` loads
    as a ``Pipeline`` (:func:`fastdp._pipeline_persistence.load_pipeline`).
    The loaded estimator's ``authenticated_`` says whether a key verified it.
    """
    json_path, _ = model_paths(path)
    try:
        data = _read_json(json_path)
        authenticated = check_authentication(json_path, data, key) if isinstance(data, dict) \
            else False
        from fastdp._pipeline_persistence import PIPELINE_FORMAT, load_pipeline

        if isinstance(data, dict) and data.get("format") == PIPELINE_FORMAT:
            model = load_pipeline(json_path, data)
            model.steps[-1][1].authenticated_ = authenticated
            return model
        model = _load_model(path, data)
        model.authenticated_ = authenticated
        return model
    except KeyError as exc:
        raise ValidationError(f"{json_path}: missing field {exc.args[0]!r}; not a complete "
                              "fastdp model file.") from exc
    except (TypeError, AttributeError, OverflowError, ValueError, RecursionError) as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(f"{json_path}: malformed model file ({type(exc).__name__}: "
                              f"{str(exc)[:200]}).") from None


def _load_model(path, data=None):
    """Load an estimator saved by :func:`save_model`.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file, the ``.npz`` file or their common base path.

    Returns
    -------
    estimator
        A fitted estimator of the saved class with the saved parameters,
        ``coef_``, ``intercept_``, ``classes_``, ``n_features_in_``,
        ``epsilon_``, ``delta_``, ``noise_multiplier_``, ``privacy_event_``,
        ``privacy_report_``, ``sampler_``, ``sample_rate_``, ``clip_``,
        ``n_iter_``; plus ``model_metadata_`` (the JSON dict).  ``history_``
        is None (never saved).

    Raises
    ------
    ValidationError
        Not a fastdp model, unknown version or estimator, a missing or
        modified ``.npz`` (SHA-256 mismatch), inconsistent shapes.
    """
    data = read_model_metadata(path, data)
    json_path, _ = model_paths(path)
    classes = _estimator_classes()
    name = data["estimator"]
    if name not in classes:
        raise ValidationError(f"{json_path}: unknown estimator {name!r}; this fastdp has "
                              f"{sorted(classes)}.")
    arrays_info = data["arrays"]
    npz_path = _array_file(json_path, arrays_info.get("file"))
    payload = _read_array_file(npz_path)
    if _sha256(payload) != arrays_info.get("sha256"):
        raise ValidationError(f"{npz_path} does not match {json_path} (SHA-256 differs): the files "
                              "come from different saves or were modified.")
    arrays = _read_arrays(npz_path, payload)
    if "coef" not in arrays or "intercept" not in arrays:
        raise ValidationError(f"{npz_path}: missing 'coef' or 'intercept'.")

    try:
        estimator = classes[name](**_params_from_file(data["params"]))
    except TypeError as exc:
        raise ValidationError(f"{json_path}: parameters do not fit {name}: {exc}") from exc
    fit, privacy = data["fit"], data["privacy"]
    n_features = int(fit["n_features_in"])
    coef = np.asarray(arrays["coef"], dtype=np.float64)
    if coef.shape[-1] != n_features:
        raise ValidationError(f"{json_path}: coef has {coef.shape[-1]} features, the metadata "
                              f"says {n_features}.")
    intercept = np.asarray(arrays["intercept"], dtype=np.float64)
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise ValidationError(f"{npz_path}: non-finite coefficients; not a usable model.")
    _check_shapes(json_path, name, coef, intercept, arrays.get("classes"))
    estimator.coef_ = coef
    estimator.intercept_ = float(intercept[0]) if name == "DPRidge" else intercept
    if "classes" in arrays:
        estimator.classes_ = _checked_classes(npz_path, arrays["classes"])
    estimator.row_map_ = _row_map_from_file(json_path, data)
    estimator.solver_ = fit.get("solver", data["params"].get("solver"))
    estimator.multi_class_ = fit.get("multi_class")
    estimator.n_features_in_ = n_features
    if fit.get("feature_names_in") is not None:
        estimator.feature_names_in_ = np.asarray(fit["feature_names_in"], dtype=object)
    try:
        estimator.privacy_event_ = event_from_dict(privacy["event"])
    except (TypeError, KeyError, ValueError) as exc:
        raise ValidationError(f"{json_path}: invalid privacy event: {exc}") from exc
    estimator.delta_ = _from_number(privacy["delta"], "delta")
    estimator.epsilon_ = _checked_epsilon(json_path, privacy, estimator.privacy_event_,
                                          estimator.delta_)
    estimator.noise_multiplier_ = _from_number(privacy["noise_multiplier"], "noise_multiplier")
    estimator.noise_name_ = privacy.get("noise_name", "noise_multiplier")
    # recomputed from the saved event, never read from the file
    estimator.privacy_report_ = _recomputed_report(json_path, privacy, estimator.privacy_event_,
                                                   estimator.delta_)
    estimator.sampler_ = privacy.get("sampler")
    estimator.sample_rate_ = _from_number(privacy.get("sample_rate"), "sample_rate")
    estimator.clip_ = _from_number(privacy.get("clip"), "clip")
    estimator.n_iter_ = _count(json_path, privacy.get("n_iter", 0), "n_iter")
    estimator.fit_time_ = _from_number(fit.get("fit_time"), "fit_time")
    estimator.history_ = None
    estimator.model_metadata_ = data
    return estimator

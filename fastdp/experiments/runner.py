"""The experiment runner shared by the paper reproductions (``fastdp.experiments.seedNNN``).

A reproduction is a list of **units**: independent pieces of work (one fit,
one grid cell, one tuning selection, ...), each named by a **key** (a tuple
of JSON scalars) and producing one JSON-able **record** (a dict). This
module runs such a list and does everything that is not particular to a
paper:

* **Checkpoint.** Each finished unit is appended as one JSON line to a
  checkpoint file, flushed and fsync'ed (:func:`append_record`), so a killed
  process loses at most the unit in flight. A last line without its newline
  (a kill in the middle of a write) is ignored and, before appending, cut off
  (:func:`read_units` with ``repair=True``). An optional first line
  ``{"settings": {...}}`` records the settings the units depend on (grids,
  seeds, ...); resuming with other settings is refused instead of mixing
  units of two protocols.
* **Resume.** :func:`run_units` skips the units already in the checkpoint
  when ``resume=True``; without it an existing checkpoint is an error (it is
  never overwritten).
* **Time budget.** ``budget_min``: no unit starts after that many minutes;
  the unit in flight finishes, and the caller writes its report from the
  units present (rerun with ``resume=True`` to continue).
* **Progress.** One line per finished unit with an estimate of the time
  left (:func:`progress_line`)::

      [3/14] phishing DP-SCD ε=0.5 accuracy 0.9012 (4.2 s; elapsed 0:13, ~0:48 left)

  The estimate is the mean time per unit of this session times the units
  left (or, with a ``cost`` per unit, the time per unit of cost).
* **Reports.** :func:`jsonable`, :func:`write_json`, :func:`markdown_table`,
  :func:`claims_table` and :func:`verdict` (the shared claim/verdict
  formatting), :func:`pyplot` (matplotlib when installed, else None) and
  :func:`save_figure`.
* **Command line.** :func:`base_parser` gives every reproduction the same
  options: ``--out``, ``--quick``, ``--resume``, ``--budget-min``,
  ``--report-only`` and ``--checkpoint``; :func:`checkpoint_path` resolves the
  last one.

Each ``seedNNN`` module keeps only what is particular to its paper: its
data, the unit plan, how to run one unit, and how to turn the records into
its report.

Privacy: the runner only stores and prints what the units return. The
reproductions' evaluation numbers (accuracies, objectives) read the data and
are non-private diagnostics, as each module's docstring says.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = [
    "SETTINGS_FIELD",
    "jsonable",
    "append_record",
    "unit_key",
    "read_units",
    "read_settings",
    "read_checkpoint",
    "merge_units",
    "write_unit_archive",
    "format_duration",
    "progress_line",
    "log_line",
    "run_units",
    "write_json",
    "markdown_table",
    "claims_table",
    "verdict",
    "pyplot",
    "save_figure",
    "base_parser",
    "checkpoint_path",
]

#: Key of the optional first line of a checkpoint: ``{"settings": {...}}``.
SETTINGS_FIELD = "settings"


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------
def jsonable(obj, *, nonfinite="keep"):
    """``obj`` with tuples as lists, numpy scalars/arrays as Python numbers/lists, keys as str.

    Parameters
    ----------
    obj : object
        Nested dicts, lists, tuples, numpy arrays and scalars.
    nonfinite : {"keep", "string"}, default "keep"
        ``"string"`` writes ``inf``/``nan`` floats as the strings ``"inf"``,
        ``"nan"`` (for strict JSON, ``allow_nan=False``); ``"keep"`` leaves
        them as floats (Python's JSON writes ``Infinity``/``NaN``).
    """
    if nonfinite not in ("keep", "string"):
        raise ValidationError(f"nonfinite must be 'keep' or 'string'; got {nonfinite!r}")
    if isinstance(obj, dict):
        return {str(k): jsonable(v, nonfinite=nonfinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, nonfinite=nonfinite) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), nonfinite=nonfinite)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if nonfinite == "string" and not math.isfinite(value):
            return str(value)
        return value
    return obj


def write_json(path, payload, *, indent=1, nonfinite="keep", newline=True):
    """Write ``jsonable(payload)`` to ``path`` (strict JSON when ``nonfinite="string"``)."""
    text = json.dumps(jsonable(payload, nonfinite=nonfinite), indent=indent,
                      allow_nan=nonfinite == "keep")
    Path(path).write_text(text + ("\n" if newline else ""))
    return Path(path)


# ---------------------------------------------------------------------------
# checkpoint
# ---------------------------------------------------------------------------
def append_record(path, record):
    """Append one record as a JSON line, flushed and fsync'ed (a kill loses at most it)."""
    line = json.dumps(jsonable(record), default=float) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _lines(path, *, repair):
    """Complete lines of a checkpoint (``.jsonl``) or archive (``.jsonl.gz``)."""
    path = Path(path)
    if not path.exists():
        return []
    archived = path.suffix == ".gz"
    raw = gzip.decompress(path.read_bytes()) if archived else path.read_bytes()
    complete = raw[:raw.rfind(b"\n") + 1]
    if repair and archived:
        raise ValidationError(f"{path} is a unit archive (read-only): run into a .jsonl "
                              "checkpoint and pass the archive with --units")
    if repair and len(complete) < len(raw):
        with open(path, "r+b") as fh:           # cut the torn last line off
            fh.truncate(len(complete))
    return complete.decode("utf-8").splitlines()


def _is_settings(record):
    return isinstance(record, dict) and set(record) == {SETTINGS_FIELD}


def read_settings(path):
    """The settings of a checkpoint's first line (None when it has none or no file)."""
    for line in _lines(path, repair=False):
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:
                return None
            return record[SETTINGS_FIELD] if _is_settings(record) else None
    return None


def read_units(path, key_of, *, repair=False, label="unit"):
    """Unit records of a JSON-lines checkpoint or gzip'ed archive, ``{key: record}``.

    Parameters
    ----------
    path : path
        A missing file holds no units.
    key_of : callable
        ``record -> key``; a record it cannot read (KeyError, TypeError,
        ValueError) is a ValidationError naming the line.
    repair : bool
        Cut a torn last line (no newline: a process killed while writing)
        off the file, so appends start on a fresh line. Archives are
        read-only.
    label : str
        What a record is called in error messages.

    The first record of a key wins; a settings line is skipped.
    """
    units = {}
    for number, line in enumerate(_lines(path, repair=repair), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if number == 1 and _is_settings(record):
                continue
            key = key_of(record)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError(f"{path}:{number}: not a {label} record ({exc}); "
                                  "remove that line or the file") from None
        units.setdefault(key, record)
    return units


def unit_key(record):
    """The key of a record that :func:`run_units` stamped (no ``key_of``): its ``unit`` field."""
    return tuple(record["unit"])


def read_checkpoint(path, *, key_of=unit_key, label="unit"):
    """``(settings, {key: record})`` of a checkpoint; a ValidationError when it holds no units."""
    units = read_units(path, key_of, label=label)
    if not units:
        raise ValidationError(f"no {label} records in {path}: run the units first "
                              "(without --report-only)")
    return read_settings(path), units


def merge_units(paths, key_of, *, label="unit"):
    """``{key: record}`` of several checkpoints or archives; the first file wins."""
    units = {}
    for path in paths:
        for key, record in read_units(path, key_of, label=label).items():
            units.setdefault(key, record)
    return units


def write_unit_archive(path, records, sort_key):
    """Write records to a gzip'ed JSON-lines archive sorted by ``sort_key``, byte-reproducible.

    ``records`` is a ``{key: record}`` dict or an iterable of records. The
    archive (``.jsonl.gz``) has no timestamp or file name inside, so the same
    records always give the same bytes; :func:`read_units` reads it. Returns
    the path.
    """
    records = records.values() if isinstance(records, dict) else records
    lines = "".join(json.dumps(jsonable(r), default=float, sort_keys=True) + "\n"
                    for r in sorted(records, key=sort_key))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="",
                                                  mtime=0, compresslevel=9) as fh:
        fh.write(lines.encode("utf-8"))
    return path


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------
def format_duration(seconds):
    """``m:ss`` (``h:mm:ss`` from one hour on) of a non-negative number of seconds."""
    seconds = max(0, int(round(float(seconds))))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(k, n, unit, result, seconds, elapsed, left):
    """``[k/N] <unit> <result> (t s; elapsed m:ss, ~m:ss left)``.

    ``left`` is the estimated time left in seconds (None: no estimate yet).
    """
    body = " ".join(part for part in (unit, result) if part)
    estimate = "" if left is None else f", ~{format_duration(left)} left"
    return (f"[{k}/{n}] {body} ({seconds:.1f} s; elapsed {format_duration(elapsed)}"
            f"{estimate})")


def log_line(line):
    """Print a progress line at once (flushed, so a log file or pipe shows it as it happens)."""
    print(line, flush=True)


class _Estimate:
    """Time left: the mean time per unit (of cost) of this session times what is left."""

    def __init__(self, costs):
        self.left = float(sum(costs))
        self.done = 0.0
        self.spent = 0.0

    def add(self, cost, seconds):
        self.left -= cost
        self.done += cost
        self.spent += seconds
        if self.done <= 0:
            return None
        return max(0.0, self.left) * self.spent / self.done


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------
def _start_checkpoint(checkpoint, key_of, *, resume, settings, label):
    """Repair and read an existing checkpoint (checking resume and settings); start a new one."""
    checkpoint = Path(checkpoint)
    done = read_units(checkpoint, key_of, repair=True, label=label)
    if done and not resume:
        raise ValidationError(f"{checkpoint} already holds {len(done)} unit(s): pass --resume "
                              "(resume=True) to continue it, or remove the file to start over")
    if settings is not None:
        settings = jsonable(settings)
        present = read_settings(checkpoint)
        if done and present != settings:
            raise ValidationError(
                f"{checkpoint} was made with other settings ({present}) than this run "
                f"({settings}): use another --out or --checkpoint, or remove the file")
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    if settings is not None and not done:      # a fresh checkpoint starts with its settings
        with open(checkpoint, "w", encoding="utf-8"):
            pass
        append_record(checkpoint, {SETTINGS_FIELD: settings})
    return done


def run_units(checkpoint, plan, run_unit, *, key_of=None, resume=False, budget_min=None,
              settings=None, describe=str, summarize=None, cost=None, log=log_line,
              clock=time.monotonic, timer=time.perf_counter, after_unit=None, label="unit"):
    """Run the units of ``plan`` not yet done, saving each record as it finishes.

    Parameters
    ----------
    checkpoint : path or None
        JSON-lines file of records (created if absent); None keeps the
        records in memory only (no resume).
    plan : sequence of keys
        The units in execution order.
    run_unit : callable
        ``(key, units) -> record`` (a dict; JSON-able after :func:`jsonable`);
        ``units`` is the ``{key: record}`` dict of the units present so far
        (from the checkpoint and this session), for units that build on
        earlier ones.
    key_of : callable, optional
        ``record -> key``, to read the checkpoint back. Without it each
        record is stamped with its key (a ``unit`` field, first) and its
        time (``seconds``, unless the unit set it), and :func:`unit_key`
        reads the key back.
    resume : bool
        Skip the units already in the checkpoint. Without it an existing
        checkpoint holding units is an error (nothing is overwritten).
    budget_min : float, optional
        Start no unit after this many minutes of ``clock`` (the unit in
        flight finishes).
    settings : dict, optional
        What the records depend on besides their keys; written as the first
        line of a new checkpoint, and a checkpoint with other settings is
        refused.
    describe, summarize : callable, optional
        ``key -> str`` and ``record -> str`` for the progress line.
    cost : callable, optional
        ``key -> float``, the relative cost of a unit for the estimate of the
        time left (default: every unit costs the same).
    log : callable or None
        Receives one progress line per unit (None: silent).
    clock, timer : callables
        Clocks of the budget and of the unit times (tests inject them).
    after_unit : callable, optional
        Called with each new record after it is saved.
    label : str
        What a record is called in error messages.

    Returns
    -------
    status : dict
        ``ran``, ``skipped`` (already present), ``remaining`` (not run because
        of the budget) and ``stopped`` (True if the budget ended the session).
    units : dict
        ``{key: record}`` of the planned units present (done before or now),
        in plan order.
    """
    plan = list(plan)
    stamp = key_of is None
    key_of = key_of or unit_key
    if checkpoint is not None:
        done = _start_checkpoint(checkpoint, key_of, resume=resume, settings=settings,
                                 label=label)
    else:
        done = {}
    todo = [key for key in plan if key not in done]
    skipped = len(plan) - len(todo)
    cost = cost or (lambda key: 1.0)
    estimate = _Estimate(cost(key) for key in todo)
    deadline = None if budget_min is None else clock() + 60.0 * budget_min
    started = timer()
    ran = 0
    present = dict(done)
    status = dict(ran=0, skipped=skipped, remaining=0, stopped=False)
    for key in todo:
        if deadline is not None and clock() >= deadline:
            if log:
                log(f"time budget of {budget_min} min reached: {len(todo) - ran} unit(s) left "
                    "(rerun with --resume)")
            status.update(ran=ran, remaining=len(todo) - ran, stopped=True)
            break
        t0 = timer()
        record = run_unit(key, present)
        seconds = timer() - t0
        if stamp:
            record = {"unit": list(key), **record}
            record.setdefault("seconds", seconds)
        if checkpoint is not None:
            append_record(checkpoint, record)
        present[key] = record
        ran += 1
        left = estimate.add(cost(key), seconds)
        if log:
            log(progress_line(skipped + ran, len(plan), describe(key),
                              summarize(record) if summarize else "", seconds,
                              timer() - started, left))
        if after_unit is not None:
            after_unit(record)
    else:
        status.update(ran=ran)
    return status, {key: present[key] for key in plan if key in present}


# ---------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------
def markdown_table(columns, rows):
    """Lines of a markdown table with the given header and rows (cells formatted with str)."""
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def claims_table(claims, columns=("claim", "held", "detail"), *, yes="yes", no="no"):
    """Markdown table of claim rows, e.g. ``(claim, held, detail)``; booleans become yes/no."""
    def cell(value):
        if isinstance(value, (bool, np.bool_)):
            return yes if value else no
        return value

    return markdown_table(columns, [[cell(v) for v in row] for row in claims])


def verdict(flags):
    """``"yes"`` (all), ``"partly (k/n)"``, ``"no"`` (none) or ``"n/a ..."`` (no flag)."""
    flags = list(flags)
    if not flags:
        return "n/a (needs two or more ε)"
    if all(flags):
        return "yes"
    if any(flags):
        return f"partly ({sum(flags)}/{len(flags)})"
    return "no"


def pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(fig, path, *, dpi=100):
    """Save a figure (layout tightened) and close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return Path(path)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def base_parser(description, *, name, quick_help="small grids (minutes, not hours)"):
    """An ArgumentParser with the options every reproduction shares.

    ``--out`` (default ``{name}_results``), ``--quick``, ``--resume``,
    ``--budget-min M``, ``--report-only`` and ``--checkpoint FILE`` (default
    ``OUT/{name}_units.jsonl``, see :func:`checkpoint_path`).
    """
    parser = argparse.ArgumentParser(prog=f"python -m fastdp.experiments.{name}",
                                     description=description)
    parser.add_argument("--out", default=f"{name}_results", help="output directory")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--resume", action="store_true",
                        help="continue the checkpoint: skip the units it already holds")
    parser.add_argument("--budget-min", type=float, default=None, metavar="M",
                        help="start no unit after M minutes, then write the report "
                             "(rerun with --resume to continue)")
    parser.add_argument("--report-only", action="store_true",
                        help="write the report from the checkpoint, run nothing")
    parser.add_argument("--checkpoint", default=None,
                        help=f"unit checkpoint (JSON lines; default OUT/{name}_units.jsonl)")
    return parser


def checkpoint_path(args, name):
    """The checkpoint of parsed :func:`base_parser` arguments."""
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / f"{name}_units.jsonl"

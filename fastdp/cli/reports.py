"""The privacy report ``fastdp train`` and ``fastdp evaluate`` print."""

from __future__ import annotations

import math


def _adjacency_text(event):
    adjacency = getattr(event, "adjacency", None)
    if adjacency is None:
        return "none (not private)"
    value = getattr(adjacency, "value", str(adjacency))
    return {"add_remove": "add/remove one example",
            "replace_one": "replace one example"}.get(value, value)


def _event_text(data, limit=400):
    """A one-line description of an event's ``to_dict()``: kind(parameters, members)."""
    if isinstance(data, dict):
        kind = data.get("kind", "?")
        parts = [f"{k}={_event_text(v, limit)}" for k, v in data.items()
                 if k not in ("kind", "adjacency")]
        text = f"{kind}({', '.join(parts)})"
    elif isinstance(data, (list, tuple)):
        text = "[" + ", ".join(_event_text(v, limit) for v in data) + "]"
    elif isinstance(data, float):
        text = f"{data:.6g}"
    else:
        text = str(data)
    return text if len(text) <= limit else text[:limit] + "..."


def _print_loaded_privacy(model, accountant, out):
    """The privacy of a model read from a file: only what loading recomputed or checked.

    ε and the report are recomputed from the saved event at the saved δ; the
    event itself is printed, not the file's separate noise / sampler fields.
    """
    out("privacy")
    out(f"  epsilon        {model.epsilon_:.6g} (recomputed from the saved event"
        f"{'' if accountant is None else f', accountant {accountant}'})")
    out(f"  delta          {model.delta_:.3g}")
    out(f"  event          {_event_text(model.privacy_event_.to_dict())}")
    out(f"  adjacency      {_adjacency_text(model.privacy_event_)}")
    if model.privacy_report_ is not None:
        out(f"  report         {model.privacy_report_}")
    if getattr(model, "authenticated_", False):
        out("  file           authenticated (its HMAC verified under the given key)")
    else:
        out("  file           NOT authenticated: a saved model is only as trustworthy as its "
            "file (anyone who can write it can forge a consistent event); use --key-file")


def _print_privacy(model, *, target=None, accountant=None, out=print):
    eps = model.epsilon_
    if math.isinf(eps):
        out("privacy          NONE: epsilon = inf (non-private fit)")
        return
    if getattr(model, "model_metadata_", None) is not None:  # loaded from a file
        _print_loaded_privacy(model, accountant, out)
        return
    if math.isinf(eps):
        out("privacy          NONE: epsilon = inf (non-private fit)")
        return
    target_text = "" if target is None else f" (target {target:g}"
    if accountant is not None:
        target_text += f", accountant {accountant}" if target_text else f" (accountant {accountant}"
    target_text += ")" if target_text else ""
    out("privacy")
    out(f"  epsilon        {eps:.6g}{target_text}")
    if eps == 0:
        out("                 (the accountant's bound is exactly 0: with this much noise the "
            "fit is (0, delta)-DP; the report below says the same)")
    out(f"  delta          {model.delta_:.3g}")
    out(f"  noise          {model.noise_name_} = {model.noise_multiplier_:.6g}")
    out(f"  sampler        {model.sampler_} (sample rate q = {model.sample_rate_:.4g}, "
        f"T = {model.n_iter_} steps)")
    out(f"  adjacency      {_adjacency_text(model.privacy_event_)}")
    out("  private        the training examples (rows and labels); released: the model "
        "coefficients and intercept")
    if model.privacy_report_ is not None:
        out(f"  report         {model.privacy_report_}")


def _print_ledger_and_save(args, model, ledger):
    """Print the ledger line, save the model if ``--out`` asks; returns exit status 0.

    The common ending of ``fastdp train`` (in memory and with ``--ray``).
    """
    if ledger is not None:
        print(f"ledger           {args.ledger}: spent {ledger.spent():.6g} of "
              f"{ledger.epsilon:g} at delta {ledger.delta:g} (remaining {ledger.remaining():.6g})")
    if args.out:
        from fastdp.cli.data import _read_key
        from fastdp.persistence import model_paths, save_model

        json_path = save_model(model, args.out, key=_read_key(getattr(args, "key_file", None)))
        print(f"model saved      {json_path} + {model_paths(json_path)[1]}")
    return 0

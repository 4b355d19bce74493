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


def _print_privacy(model, *, target=None, accountant=None, out=print):
    eps = model.epsilon_
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
        from fastdp.persistence import model_paths, save_model

        json_path = save_model(model, args.out)
        print(f"model saved      {json_path} + {model_paths(json_path)[1]}")
    return 0

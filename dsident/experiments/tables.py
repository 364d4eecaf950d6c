"""The benchmark table: rows model × inference, columns dataset × {D_stsp, D_H, PE(n), diverged, fit time}.

Cells are median ± MAD over seeds (diverged: the fraction of seeds whose free run diverged;
fit time: median seconds). Extra rows — the floor of SPEC-metrics §5 and an untrained model —
are passed in as plain score dicts. Failed points are counted and their first error listed
under the table, so a missing number always has a stated reason.

A second table (:func:`regime_table`) says where each cell's free runs end up when run twice as
long as the scored stretch (:mod:`.late_run`).
"""
from __future__ import annotations

import math
from typing import Iterator, Mapping, Sequence

import numpy as np
import xarray as xr

from .machine import describe_machines

#: what counts as a reconstruction (issue #9): median D_stsp within this many floors ...
RECONSTRUCTION_FLOOR_RATIO = 3.0
#: ... and median D_H at most this
RECONSTRUCTION_MAX_DH = 0.15


def is_reconstruction(d_stsp: float, d_h: float, floor_d_stsp: float) -> bool:
    """D_stsp ≤ 3× the floor's and D_H ≤ 0.15 (NaN anywhere: False)."""
    ratio = d_stsp / floor_d_stsp if math.isfinite(floor_d_stsp) and floor_d_stsp > 0 else math.nan
    return bool(math.isfinite(ratio) and ratio <= RECONSTRUCTION_FLOOR_RATIO and math.isfinite(d_h)
                and d_h <= RECONSTRUCTION_MAX_DH)


def floor_multiple(d_stsp: float, d_h: float, floor_d_stsp: float) -> str:
    """" (2.35× ✓)": a D_stsp's multiple of the floor, with a ✓ for a reconstruction
    (:func:`is_reconstruction`); empty when either D_stsp or the floor is missing."""
    if not (math.isfinite(d_stsp) and math.isfinite(floor_d_stsp) and floor_d_stsp > 0):
        return ""
    return f" ({d_stsp / floor_d_stsp:.2f}×{' ✓' if is_reconstruction(d_stsp, d_h, floor_d_stsp) else ''})"


#: (column label, variable in the results dataset)
COLUMNS: tuple[tuple[str, str], ...] = (("D_stsp", "D_stsp"), ("D_H", "D_H"), ("PE({n})", "PE"),
                                        ("diverged", "diverged"), ("fit time (s)", "fit_time"))


def floor_discriminates(floor: Mapping[str, float]) -> bool:
    """Whether a floor can mark reconstructions: False when a run at rest
    (``floor["D_stsp_at_rest"]``, given for a recording's floor) scores within
    :data:`RECONSTRUCTION_FLOOR_RATIO` × the floor's D_stsp, as on a short test stretch whose
    bins are mostly empty; then D_stsp cannot tell a reconstruction from a fixed point."""
    at_rest = floor.get("D_stsp_at_rest")
    d_stsp = floor.get("D_stsp", math.nan)
    if at_rest is None or not math.isfinite(float(at_rest)) or not math.isfinite(float(d_stsp)):
        return True
    return float(at_rest) > RECONSTRUCTION_FLOOR_RATIO * float(d_stsp)


def median_mad(values: Sequence[float] | np.ndarray) -> tuple[float, float, int]:
    """Median and median absolute deviation of the finite values, and how many there were."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return math.nan, math.nan, 0
    med = float(np.median(arr))
    return med, float(np.median(np.abs(arr - med))), int(arr.size)


#: the line under a table with an off-grid D_stsp (:func:`with_off_grid`)
OFF_GRID_EXPLAINED = ("off grid: no sample of that many seeds' free runs fell on the test data's grid (each channel's "
                      "range ± 0.1 std, SPEC-metrics §1), so their D_stsp is undefined and the median is over the "
                      "others; such a run lives elsewhere in state space (a fixed point or cycle away from the data)")


def with_off_grid(cell: str, d_stsp: np.ndarray, diverged: np.ndarray) -> str:
    """A D_stsp cell over finished seeds, saying how many of them were off grid: a free run that did
    not diverge but never entered the test data's grid has D_stsp NaN, which the median leaves
    out, so without this a row of such seeds read "–" (as if unscored) and a row with one would
    show only its better seeds' median. All off grid: "off grid"."""
    d = np.asarray(d_stsp, dtype=float)
    off = int((~np.isfinite(d) & (np.asarray(diverged, dtype=float) == 0)).sum())
    if off == 0:
        return cell
    if off == d.size:
        return "off grid"
    return f"{cell} ({off}/{d.size} off grid)"


def _fmt(value: float, digits: int = 3) -> str:
    if not math.isfinite(value):
        return "–"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.{digits}g}"


def _cell(values: np.ndarray, var: str) -> str:
    if var == "diverged":
        finite = values[np.isfinite(values)]
        return "–" if finite.size == 0 else f"{finite.mean():.2f}"
    if var == "fit_time":
        med, _, n = median_mad(values)
        return "–" if n == 0 else f"{med:.0f}" if med >= 10 else f"{med:.1f}"
    med, mad, n = median_mad(values)
    if n == 0:
        return "–"
    return _fmt(med) if n == 1 else f"{_fmt(med)} ± {_fmt(mad, 2)}"


def summary_rows(results: xr.Dataset, floor: Mapping[str, Mapping[str, float]] | None = None
                 ) -> dict[tuple[str, str], dict[str, dict[str, str]]]:
    """``(model, method) -> dataset -> variable name -> cell text`` from a results dataset.

    With ``floor`` (``dataset -> {"D_stsp": ..}``), a D_stsp cell adds its median's multiple of
    the floor, and a ✓ when the cell is a reconstruction (:func:`is_reconstruction` of the medians).
    """
    rows: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    if results.sizes.get("point", 0) == 0:
        return rows
    done = results["status"].values == "done"
    for model, method, dataset in sorted(set(zip(results["model"].values, results["method"].values,
                                                 results["dataset"].values))):
        sel = (results["model"].values == model) & (results["method"].values == method) & \
              (results["dataset"].values == dataset)
        cells = {}
        for _, var in COLUMNS:
            cells[var] = _cell(results[var].values[sel & done], var)
        cells["D_stsp"] = with_off_grid(cells["D_stsp"], results["D_stsp"].values[sel & done],
                                        results["diverged"].values[sel & done])
        floor_d = float((floor or {}).get(str(dataset), {}).get("D_stsp", math.nan))
        d_med, d_h = (median_mad(results[v].values[sel & done])[0] for v in ("D_stsp", "D_H"))
        cells["D_stsp"] += floor_multiple(d_med, d_h, floor_d)
        n_total, n_done = int(sel.sum()), int((sel & done).sum())
        if n_done < n_total:
            cells["D_stsp"] += f" ({n_total - n_done}/{n_total} failed)"
        rows.setdefault((str(model), str(method)), {})[str(dataset)] = cells
    return rows


def markdown_table(results: xr.Dataset, *, extra_rows: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
                   pe_steps: int = 20, title: str | None = None, notes: Sequence[str] = (),
                   floor: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """The benchmark table as Markdown.

    Parameters
    ----------
    results : xarray.Dataset
        From :func:`dsident.experiments.runner.records_to_dataset`.
    extra_rows : mapping, optional
        ``row label -> dataset -> {"D_stsp": .., "D_H": .., "PE": .., "diverged": ..}`` — e.g.
        ``{"floor (true system)": {...}, "untrained shplrnn": {...}}``; placed above the fits.
    pe_steps : int
        n of the PE(n) column label.
    title : str, optional
        A heading line.
    notes : sequence of str
        Lines printed under the table (settings, caveats).
    floor : mapping, optional
        ``dataset -> {"D_stsp": ..}``: each D_stsp cell then says its multiple of the floor and
        marks a reconstruction with ✓ (:func:`summary_rows`).
    """
    rows = summary_rows(results, floor)
    datasets = sorted({d for r in rows.values() for d in r} | {d for r in (extra_rows or {}).values() for d in r})
    labels = [lab.format(n=pe_steps) for lab, _ in COLUMNS]
    header = ["model × inference"] + [f"{d}: {lab}" for d in datasets for lab in labels]
    lines = ([f"### {title}", ""] if title else []) + ["| " + " | ".join(header) + " |",
                                                      "|" + "---|" * len(header)]
    for label, per_dataset in (extra_rows or {}).items():
        cells = [f"*{label}*"]
        for d in datasets:
            scores = per_dataset.get(d, {})
            for lab, var in COLUMNS:
                value = scores.get(var, math.nan)
                cells.append("–" if value is None else (_fmt(float(value)) if var != "diverged" else
                                                        ("–" if not math.isfinite(float(value)) else f"{float(value):.2f}")))
        lines.append("| " + " | ".join(cells) + " |")
    for (model, method), per_dataset in rows.items():
        cells = [f"{model} × {method}"]
        for d in datasets:
            c = per_dataset.get(d)
            cells += [c[var] for _, var in COLUMNS] if c else ["n/a"] * len(COLUMNS)
        lines.append("| " + " | ".join(cells) + " |")
    errors = _first_errors(results)
    if any("off grid" in c["D_stsp"] for r in rows.values() for c in r.values()):
        notes = [*notes, OFF_GRID_EXPLAINED]
    if floor:
        notes = [*notes, f"(k×): the median D_stsp over the floor's; ✓: a reconstruction, D_stsp ≤ "
                         f"{RECONSTRUCTION_FLOOR_RATIO:g}× the floor and D_H ≤ {RECONSTRUCTION_MAX_DH:g} (medians)"]
    machines = describe_machines(results["machine"].values) if "machine" in results else None
    if machines:                       # fit times and round-off depend on it
        notes = [*notes, machines]
    if errors or notes:
        lines.append("")
    lines += [f"- {n}" for n in notes]
    lines += [f"- failed: {key}: {err}" for key, err in errors.items()]
    return "\n".join(lines) + "\n"


def _first_errors(results: xr.Dataset) -> dict[str, str]:
    out: dict[str, str] = {}
    if results.sizes.get("point", 0) == 0:
        return out
    for i in np.flatnonzero(results["status"].values != "done"):
        key = f"{results['model'].values[i]} × {results['method'].values[i]} on {results['dataset'].values[i]}"
        msg = str(results["error"].values[i]).splitlines()[0] if str(results["error"].values[i]) else "unknown error"
        out.setdefault(key, msg[:300])
    return out


#: (column label, variable) of :func:`regime_table`
REGIME_COLUMNS: tuple[tuple[str, str], ...] = (("free run (2T)", "regime"), ("λ_max", "lambda_max"),
                                               ("late D_stsp", "D_stsp_late"))


def test_data_note(records: Sequence[Mapping], datasets: Sequence[str] | None = None) -> str:
    """One line naming each dataset's test data: how many samples the points compared (the longest
    trial, after ``eval_length``) and where they come from (a shipped set's test split, the
    ``test_data`` file, or the held-out ends of the data file, ``test_fraction``).

    ``records``: the points' ``result.json`` records (:func:`.runner.run_point`), or
    ``{"config": cfg}`` for points not run yet; ``datasets`` orders the line (default: as the
    records come)."""
    first: dict[str, Mapping] = {}
    for rec in records:
        cfg = rec.get("config") or {}
        if "dataset" in cfg and (cfg["dataset"] not in first or "test" not in first[cfg["dataset"]]):
            first[str(cfg["dataset"])] = rec
    parts = []
    for name in (datasets or list(first)):
        rec = first.get(str(name))
        if rec is None:
            continue
        cfg, test = rec.get("config") or {}, rec.get("test") or {}
        # before the run (a dry run's configurations) only the cap is known
        samples = test["samples"] if "samples" in test else f"≤ {cfg.get('eval_length')}"
        if cfg.get("test_fraction") is not None:
            source = (f"the last {100 * float(cfg['test_fraction']):g} % of every trial of the file, never seen "
                      "in training")
        elif cfg.get("test_data"):
            source = f"the file {cfg['test_data']}"
        else:
            source = "its test split"
        parts.append(f"{name} {samples} ({source})")
    return "test data (samples compared) per dataset: " + "; ".join(parts) if parts else ""


def regime_cell(regimes: Sequence[str]) -> str:
    """Count the verdicts of a cell's seeds, most common first: ``"chaotic 2/3, fixed point 1/3"``."""
    given = [str(r) for r in regimes if str(r)]
    if not given:
        return "–"
    kinds, counts = np.unique(given, return_counts=True)
    order = sorted(range(len(kinds)), key=lambda i: (-counts[i], kinds[i]))
    return ", ".join(f"{kinds[i]} {counts[i]}/{len(given)}" for i in order)


def _cell_rows(results: xr.Dataset, done: np.ndarray, datasets: Sequence[str]
               ) -> Iterator[tuple[str, list[tuple[str, np.ndarray]]]]:
    """Per model × inference with a point in ``done``: the row label and, per dataset, the mask
    of that cell's points among ``done``."""
    model, method, dataset = (results[k].values for k in ("model", "method", "dataset"))
    for m, x in sorted(set(zip(model[done], method[done]))):
        yield f"{m} × {x}", [(d, done & (model == m) & (method == x) & (dataset == d)) for d in datasets]


def regime_table(results: xr.Dataset, *, truth: Mapping[str, float] | None = None,
                 unit: Mapping[str, str] | None = None, truth_verdict: Mapping[str, str] | None = None) -> str:
    """Where each cell's free runs end up: verdicts, largest exponent and late-stretch D_stsp.

    Parameters
    ----------
    results : xarray.Dataset
        From :func:`dsident.experiments.runner.records_to_dataset` (variables ``regime``,
        ``lambda_max``, ``D_stsp_late``).
    truth : mapping, optional
        ``dataset -> largest Lyapunov exponent of the true system`` (per its time unit), shown
        in a first row.
    unit : mapping, optional
        ``dataset -> time unit`` of the exponents, for the notes.
    truth_verdict : mapping, optional
        ``dataset -> verdict`` of the true system (from its spectrum,
        :func:`dsident.analysis.spectrum_verdict`), shown in the first row's verdict column.

    Returns
    -------
    str
        Markdown (empty when no point was analysed): one row per model × inference, per dataset
        the verdict counts, the median λ_max and the late D_stsp median ± MAD. A late D_stsp well
        above the scored one means the scored stretch was a transient.
    """
    if results.sizes.get("point", 0) == 0 or "regime" not in results or not np.any(results["regime"].values != ""):
        return ""
    done = results["status"].values == "done"
    datasets = sorted(set(results["dataset"].values[done]))
    header = ["model × inference"] + [f"{d}: {lab}" for d in datasets for lab, _ in REGIME_COLUMNS]
    lines = ["### Free runs at twice the evaluation length (did they stay?)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    exponent = {d: (truth or {}).get(d) for d in datasets}
    known = [d for d in datasets if (truth_verdict or {}).get(d)
             or (exponent[d] is not None and math.isfinite(float(exponent[d])))]
    if known:                # a recording has no true system: no row of dashes for it
        cells = ["*true system*"]
        for d in datasets:
            lam = (truth or {}).get(d, math.nan)
            lam_text = _fmt(lam) if lam is not None and math.isfinite(lam) else "–"
            cells += [(truth_verdict or {}).get(d, "–"), lam_text, "–"]
        lines.append("| " + " | ".join(cells) + " |")
    for label, selections in _cell_rows(results, done, datasets):
        cells = [label]
        for d, sel in selections:
            if not sel.any():
                cells += ["n/a"] * len(REGIME_COLUMNS)
                continue
            lam, _, n = median_mad(results["lambda_max"].values[sel])
            cells += [regime_cell(results["regime"].values[sel]), "–" if n == 0 else _fmt(lam),
                      _cell(results["D_stsp_late"].values[sel], "D_stsp_late")]
        lines.append("| " + " | ".join(cells) + " |")
    units = ", ".join(f"{d} per {u}" for d, u in (unit or {}).items() if d in datasets)
    lines += ["", "- each point runs freely from the first test sample for twice the evaluation length "
              "(T): the verdict and λ_max (median over seeds" + (f"; {units}" if units else "")
              + ") are of that run, late D_stsp compares its steps [1.25 T, 2.25 T) with the same T test "
              "samples (scored: [0.25 T, 1.25 T))"]
    return "\n".join(lines) + "\n"


def _bursts_said(period: np.ndarray, spikes: np.ndarray, cv: np.ndarray) -> str:
    """``period × spikes, CV cv``: medians over the entries whose period is finite ("–" if none)."""
    ok = np.isfinite(period)
    if not ok.any():
        return "–"
    return (f"{_fmt(float(np.median(period[ok])))} × {float(np.median(spikes[ok])):g}, "
            f"CV {float(np.median(cv[ok])):.2f}")


def data_bursts_cell(results: xr.Dataset, sel: np.ndarray) -> str:
    """The test data's bursts as recorded with the first selected point (all share one test stretch)."""
    return _bursts_said(*(results[k].values[sel][:1] for k in
                          ("data_burst_period", "data_spikes_per_burst", "data_burst_cv")))


def late_bursts_cell(results: xr.Dataset, sel: np.ndarray) -> str:
    """The selected points' late free runs' bursts: medians over the runs that burst, and how many did."""
    period = results["burst_period_late"].values[sel]
    spikes, cv = results["spikes_per_burst_late"].values[sel], results["burst_cv_late"].values[sel]
    return _bursts_said(period, spikes, cv) + f" ({int(np.isfinite(period).sum())}/{int(sel.sum())} burst)"


BURSTS_EXPLAINED = ("bursts (`dsident.analysis.find_bursts`, on the test data's most variable bursting channel): "
                    "the median interval between burst onsets × the median spikes a burst, and the intervals' "
                    "coefficient of variation")


def bursts_table(results: xr.Dataset, *, unit: Mapping[str, str] | None = None) -> str:
    """The bursts of each cell's free runs at twice the evaluation length, beside the test data's.

    Parameters
    ----------
    results : xarray.Dataset
        From :func:`dsident.experiments.runner.records_to_dataset` (``burst_period_late``,
        ``spikes_per_burst_late``, ``burst_cv_late`` and ``data_burst_period``, ...).
    unit : mapping, optional
        ``dataset -> time unit`` of the periods.

    Returns
    -------
    str
        Markdown, empty when no dataset's test data burst: a first row with the test data's
        bursts, then per model × inference and bursting dataset the medians over the seeds of the
        runs that burst (period × spikes a burst, the period's CV) and how many of them burst.
    """
    if results.sizes.get("point", 0) == 0 or "data_burst_period" not in results:
        return ""
    done = results["status"].values == "done"
    names, data_period = results["dataset"].values, results["data_burst_period"].values
    datasets = sorted(d for d in set(names[done]) if np.isfinite(data_period[done & (names == d)]).any())
    if not datasets:
        return ""

    header = ["model × inference"] + [f"{d}: bursts" for d in datasets]
    lines = ["### Bursts of the free runs at twice the evaluation length", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    data_cells = []
    for d in datasets:
        sel = done & (names == d) & np.isfinite(data_period)
        data_cells.append(data_bursts_cell(results, sel))
    lines.append("| " + " | ".join(["*test data*"] + data_cells) + " |")
    for label, selections in _cell_rows(results, done, datasets):
        cells = [label]
        for _, sel in selections:
            cells.append(late_bursts_cell(results, sel) if sel.any() else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    units = ", ".join(f"{d} in {'time units' if u == 'time unit' else u}" for d, u in (unit or {}).items()
                      if d in datasets)
    lines += ["", f"- {BURSTS_EXPLAINED}; per cell the medians over the seeds whose run bursts"
              + (f" (periods: {units})" if units else "")]
    return "\n".join(lines) + "\n"


def starts_table(results: xr.Dataset, *, floor: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """Each cell scored from the first test stretch and from several starts (run key ``test_starts``).

    Parameters
    ----------
    results : xarray.Dataset
        From :func:`dsident.experiments.runner.records_to_dataset` (variables ``D_stsp``,
        ``D_stsp_starts``, ``D_stsp_starts_max``, ``D_H_starts``, ``n_starts``).
    floor : mapping, optional
        ``dataset -> {"D_stsp": ..}``: the starts' median gets its multiple of the floor and a ✓
        as the benchmark's own D_stsp does (:func:`floor_multiple`, with the starts' D_H).

    Returns
    -------
    str
        Markdown (empty when no point was scored from several starts): per model × inference and
        dataset the first stretch's D_stsp, the median over the starts (each median ± MAD over the
        seeds) and the worst start's median over the seeds. Where the two medians part, the
        first stretch's number owes that much to where the run starts.
    """
    if results.sizes.get("point", 0) == 0 or "D_stsp_starts" not in results:
        return ""
    done = (results["status"].values == "done") & np.isfinite(results["D_stsp_starts"].values)
    if not done.any():
        return ""
    datasets = sorted(set(results["dataset"].values[done]))
    header = ["model × inference"] + [f"{d}: {lab}" for d in datasets
                                      for lab in ("first stretch", "median of starts", "worst start")]
    lines = ["### Scored from several starts over the test split (`test_starts`)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, selections in _cell_rows(results, done, datasets):
        cells = [label]
        for d, sel in selections:
            if not sel.any():
                cells += ["n/a"] * 3
                continue
            med = median_mad(results["D_stsp_starts"].values[sel])[0]
            d_h = median_mad(results["D_H_starts"].values[sel])[0]
            floor_d = float((floor or {}).get(str(d), {}).get("D_stsp", math.nan))
            cells += [_cell(results["D_stsp"].values[sel], "D_stsp"),
                      _cell(results["D_stsp_starts"].values[sel], "D_stsp_starts") + floor_multiple(med, d_h, floor_d),
                      _cell(results["D_stsp_starts_max"].values[sel], "D_stsp_starts_max")]
        lines.append("| " + " | ".join(cells) + " |")
    n = sorted({int(k) for k in results["n_starts"].values[done] if math.isfinite(k)})
    lines += ["", f"- each seed's model also runs freely from {', '.join(map(str, n))} windows of the evaluation "
              "length spread evenly over the whole test split (`dsident.metrics.evaluate_starts`, the same "
              "protocol); cells are medians ± MAD over seeds of each seed's median (worst start: of each "
              "seed's largest D_stsp). Starts whose run diverged are left out of a seed's median and "
              "max (`starts.nc` lists every start)"]
    return "\n".join(lines) + "\n"


def trend_note(results: xr.Dataset) -> str:
    """The cells with fits that were still improving when they stopped, as a Markdown note.

    Reads ``still_improving`` (:func:`dsident.inference.training_trend.training_trend`'s verdict
    per point; NaN where a fit had no reading). Returns "" when no point was flagged, else one
    line per flagged cell (``"ecg × gnode × teacher-forcing: 4 of 8 seeds"``) under a heading.
    """
    if results.sizes.get("point", 0) == 0 or "still_improving" not in results:
        return ""
    flag = results["still_improving"].values
    done = (results["status"].values == "done") & np.isfinite(flag)
    cells = []
    for d, model, method in sorted(set(zip(results["dataset"].values[done], results["model"].values[done],
                                           results["method"].values[done]))):
        sel = done & (results["dataset"].values == d) & (results["model"].values == model) & \
              (results["method"].values == method)
        if flag[sel].sum() > 0:
            cells.append(f"- {d} × {model} × {method}: {int(flag[sel].sum())} of {int(sel.sum())} seeds")
    if not cells:
        return ""
    return ("### Fits still improving when they stopped\n\n"
            "The kept epoch was in the last tenth of the epochs and the median training D_stsp of the scored "
            "free runs fell by a quarter or more over the last quarter (`dsident.inference.training_trend`): "
            "more training (`n_epochs`, or a `polish` stage) may help these cells.\n\n" + "\n".join(cells) + "\n")

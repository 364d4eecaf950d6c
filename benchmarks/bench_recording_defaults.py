"""The recording defaults against each model's own method, on two simulated "user recordings".

Session 47 (docs/main_job.md "Session 47") chose `RECORDING_METHODS` / `RECORDING_DEFAULTS`
(dsident/experiments/config.py) from these fits. The script writes the two recordings as CSV
files, as a lab would hand them over, and fits each model by `dsident fit FILE
--test-fraction 0.2` twice: with its defaults for a data file (now) and with its own method
(before). It prints D_stsp and D_H on the held-out fifth, the fit time, and the recording's
floor (two other stretches of the same recording against the held-out one).

- Van der Pol, mu = 2: x and dx/dt, dt 0.05, noise 0.02, 8 000 samples, a 10-sample gap in x;
- Rössler, a = b = 0.2, c = 5.7: dt 0.1, 13 000 samples after a 200-time-unit transient, noise
  5 % of each channel's std, with a `time` column (read as the sample times, so no --dt);
- Hodgkin-Huxley (session 48): the membrane voltage of the squid axon model at 10 µA/cm² (tonic
  spiking, a spike every 14.7 ms), 20 kHz for 5 s (100 000 samples) after 200 ms, noise 0.5 mV,
  one channel in mV with a `time_ms` column.
- Hindmarsh-Rose (session 49): the membrane potential in the chaotic bursting regime, dt 0.1,
  60 000 samples, noise 1 % of its std, one channel with a `time` column. `--write-only` writes
  the recordings and stops, for a grid over them (`dsident benchmark --datasets DIR/hr.csv`).

Usage::

    python benchmarks/bench_recording_defaults.py [--models rplrnn gnode ...] [--systems vdp rossler hh]
        [--seeds 0 1 2] [--out DIR] [--option n_epochs=3]      # --option: passed to every fit

One fit at a time, one torch thread; the full grid (6 models × 2 systems × 2 methods) takes
about an hour and a half on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from dsident import metrics
from dsident.experiments.config import MODEL_DEFAULTS, default_method

MODELS = ("shplrnn", "rplrnn", "gnode", "ltc", "rfwp", "organics")


def van_der_pol(path: Path) -> float:
    """Write the Van der Pol recording (no time column); return its dt."""
    dt = 0.05
    t = np.arange(0.0, 400.0, dt)
    sol = solve_ivp(lambda _, y: [y[1], 2.0 * (1 - y[0] ** 2) * y[1] - y[0]], (0, 400), [1.0, 0.0],
                    t_eval=t, rtol=1e-8).y.T
    x = sol + 0.02 * np.random.default_rng(0).standard_normal(sol.shape)
    x[1000:1010, 0] = np.nan                                     # a gap: masked, never filled
    np.savetxt(path, x, delimiter=",")
    return dt


def rossler(path: Path) -> None:
    """Write the Rössler recording with a header and a `time` column (its step: 0.1)."""
    dt = 0.1
    t = np.arange(0.0, 1500.0, dt)
    sol = solve_ivp(lambda _, y: [-y[1] - y[2], y[0] + 0.2 * y[1], 0.2 + y[2] * (y[0] - 5.7)], (0, 1500),
                    [1.0, 1.0, 0.0], t_eval=t, rtol=1e-9, atol=1e-9).y.T[2000:]
    x = sol + 0.05 * np.random.default_rng(0).standard_normal(sol.shape) * sol.std(0)
    np.savetxt(path, np.column_stack([np.arange(len(x)) * dt, x]), delimiter=",", header="time,x,y,z",
               comments="", fmt="%.6g")


def hodgkin_huxley(path: Path) -> None:
    """Write the Hodgkin-Huxley voltage recording (mV) with a `time_ms` column (its step: 0.05 ms)."""
    def rates(v: float) -> tuple[float, ...]:
        return (0.1 * (v + 40) / (1 - np.exp(-(v + 40) / 10)), 4 * np.exp(-(v + 65) / 18),
                0.07 * np.exp(-(v + 65) / 20), 1 / (1 + np.exp(-(v + 35) / 10)),
                0.01 * (v + 55) / (1 - np.exp(-(v + 55) / 10)), 0.125 * np.exp(-(v + 65) / 80))

    def rhs(_: float, y: np.ndarray) -> list[float]:
        v, m, h, n = y
        am, bm, ah, bh, an, bn = rates(v)
        return [10.0 - 120 * m ** 3 * h * (v - 50) - 36 * n ** 4 * (v + 77) - 0.3 * (v + 54.4),
                am * (1 - m) - bm * m, ah * (1 - h) - bh * h, an * (1 - n) - bn * n]

    dt, skip = 0.05, 200.0
    t = np.arange(0.0, 5000.0 + skip, dt)
    v = solve_ivp(rhs, (0, t[-1]), [-65, 0.05, 0.6, 0.32], t_eval=t, rtol=1e-8, atol=1e-8,
                  method="LSODA").y[0, int(skip / dt):]
    v = v + 0.5 * np.random.default_rng(0).standard_normal(v.shape)
    np.savetxt(path, np.column_stack([np.arange(len(v)) * dt, v]), delimiter=",", header="time_ms,V_mV",
               comments="", fmt="%.5f")


def hindmarsh_rose(path: Path) -> None:
    """Write the Hindmarsh-Rose membrane potential in its chaotic bursting regime (I = 3.25,
    r = 0.006, s = 4, x_R = -1.6: 1-3 spikes a burst, irregularly) with a `time` column (step
    0.1), 60 000 samples after 500 time units, noise 1 % of its std: one channel, as a lab
    records a voltage."""
    def rhs(_: float, y: np.ndarray) -> list[float]:
        x, w, z = y
        return [w - x ** 3 + 3 * x ** 2 - z + 3.25, 1 - 5 * x ** 2 - w, 0.006 * (4 * (x + 1.6) - z)]

    dt, skip, n = 0.1, 500.0, 60_000
    t = np.arange(0.0, skip + n * dt, dt)[: int(skip / dt) + n]
    x = solve_ivp(rhs, (0, t[-1]), [-1.0, 0.0, 3.0], t_eval=t, rtol=1e-9, atol=1e-9,
                  method="LSODA").y[0, int(skip / dt):]
    x = x + 0.01 * x.std() * np.random.default_rng(0).standard_normal(x.shape)
    np.savetxt(path, np.column_stack([np.arange(len(x)) * dt, x]), delimiter=",", header="time,V",
               comments="", fmt="%.6g")


def recording_floor(path: Path, fraction: float = 0.2) -> tuple[float, float]:
    """Median D_stsp and D_H of the stretches before the held-out one against it."""
    from dsident.experiments.inputs import load_data

    x = load_data(str(path), dt=1.0 if path.name.startswith("vdp") else None)["x"].values[0]
    n = int(np.floor(len(x) * fraction))
    test = x[-n:]
    scores = []
    for k in (1, 2, 3):
        other = x[len(x) - (k + 1) * n: len(x) - k * n]
        ok = np.isfinite(other).all(1) & np.isfinite(test).all(1)
        scores.append((metrics.state_space_divergence(test[ok], other[ok]),
                       metrics.power_spectrum_distance(test[ok], other[ok]) if ok.all() else np.nan))
    return float(np.median([s[0] for s in scores])), float(np.nanmedian([s[1] for s in scores]))


def fit(path: Path, model: str, method: str | None, out: Path, dt: float | None, extra: list[str],
        seed: int = 0) -> dict:
    """`dsident fit` one model; its scores and fit time from metrics.nc / config.json."""
    import xarray as xr

    cmd = [sys.executable, "-m", "dsident.cli", "fit", str(path), "--model", model, "--test-fraction", "0.2",
           "--out", str(out), "--no-progress", "--seed", str(seed), *(["--dt", str(dt)] if dt else []),
           *(["--method", method] if method else [])]
    for item in extra:
        cmd += ["--option", item]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    cfg = json.loads((out / "config.json").read_text())
    with xr.open_dataset(out / "metrics.nc", engine="h5netcdf") as res:
        return {"method": cfg["method"], "D_stsp": float(res["state_space_divergence"]),
                "D_H": float(res["power_spectrum_distance"]), "fit_time": float(cfg["fit_time"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--systems", nargs="+", default=["vdp", "rossler"], choices=["vdp", "rossler", "hh", "hr"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds of every fit (default 0)")
    parser.add_argument("--out", default=None, help="folder for the recordings and fits (default: a temporary one)")
    parser.add_argument("--option", action="append", default=[], help="KEY=VALUE passed to every fit")
    parser.add_argument("--write-only", action="store_true", help="write the recordings and stop")
    args = parser.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="dsident-recordings-"))
    root.mkdir(parents=True, exist_ok=True)
    print("| recording | floor D_stsp / D_H | model | seed | now: method, D_stsp, D_H, fit s | before: method, D_stsp, D_H, fit s |")
    print("|---|---|---|---|---|---|")
    for system in args.systems:
        path = root / f"{system}.csv"
        dt = None
        if system == "vdp":
            dt = van_der_pol(path)
        elif system == "rossler":
            rossler(path)
        elif system == "hr":
            hindmarsh_rose(path)
        else:
            hodgkin_huxley(path)
        if args.write_only:
            print(f"| {system} | {path} | | | | |")
            continue
        floor_d, floor_h = recording_floor(path)
        for model in args.models:
            for seed in args.seeds:
                now = fit(path, model, None, root / f"{system}-{model}-now-{seed}", dt, args.option, seed)
                own = MODEL_DEFAULTS[model]["method"]
                before = (now if default_method(model, str(path)) == own else
                          fit(path, model, own, root / f"{system}-{model}-own-{seed}", dt, args.option, seed))
                cells = [" / ".join([r.get("error", "")] if "error" in r else
                                    [r["method"], f"{r['D_stsp']:.3g}", f"{r['D_H']:.3g}", f"{r['fit_time']:.0f}"])
                         for r in (now, before)]
                print(f"| {system} | {floor_d:.3g} / {floor_h:.3g} | {model} | {seed} | {cells[0]} | {cells[1]} |",
                      flush=True)
    print(f"\nfits in {root}")


if __name__ == "__main__":
    main()

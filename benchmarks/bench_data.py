"""Data benchmarks: load time of every shipped split (target < 1 s) and the size of data/; the
speed of reading a user's CSV recording.

Run:  python benchmarks/bench_data.py [--rows N]

Prints, per split: the first load in a fresh Python process (import of dsident.datasets
and xarray included, measured separately), and the best of 5 warm loads in this process. Also
the file sizes and the total size of the data folder (target < 20 MB). Then a CSV recording of
N rows (a time column and two channels; default 200 000, 10 s at 20 kHz): `load_array` (numpy's
compiled reader for all-number tables) against the cell-by-cell route that tables with empty or
quoted cells take, best of 3, and their ratio.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

_COLD = """
import time
t0 = time.perf_counter()
from dsident import datasets
t1 = time.perf_counter()
datasets.load({name!r}, {split!r})
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def text_table_speed(rows: int) -> None:
    """Seconds to read a ``rows``-row CSV by load_array and by the cell-by-cell route; their ratio."""
    import tempfile

    import numpy as np

    from dsident.data import load_array
    from dsident.data.importers.arrays import _read_cell_by_cell

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rec.csv"
        x = np.random.default_rng(0).standard_normal((rows, 2)) * 10 - 60
        np.savetxt(path, np.column_stack([np.arange(rows) * 0.05, x]), delimiter=",", header="time_ms,V1,V2",
                   comments="", fmt="%.6g")

        def best(func) -> float:
            times = []
            for _ in range(3):
                start = time.perf_counter()
                func()
                times.append(time.perf_counter() - start)
            return min(times)

        fast = best(lambda: load_array(path))
        slow = best(lambda: _read_cell_by_cell(path, ",", ["time_ms", "V1", "V2"]))
    print(f"CSV of {rows} rows × 3 columns ({path.name}, {rows * 3 / 1e6:.1f} M cells): load_array {fast:.3f} s, "
          f"cell-by-cell route {slow:.3f} s: {slow / fast:.1f}× faster")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the CSV recording")
    rows = parser.parse_args().rows
    from dsident import datasets

    folder = Path(datasets.data_dir())
    print(f"data folder: {folder}")
    print(f"{'set':<16} {'split':<6} {'shape':<16} {'MB':>5}  {'import s':>8}  {'cold load s':>11}  {'warm load s':>11}")
    worst = 0.0
    for name, spec in datasets.DATASETS.items():
        for split in spec.splits:
            out = subprocess.run([sys.executable, "-c", _COLD.format(name=name, split=split)], capture_output=True,
                                 text=True, check=True).stdout.split()
            import_s, cold = float(out[0]), float(out[1])
            warm = []
            for _ in range(5):
                start = time.perf_counter()
                ds = datasets.load(name, split)
                warm.append(time.perf_counter() - start)
            shape = "×".join(str(ds.sizes[d]) for d in ("trial", "time", "channel"))
            size = (folder / f"{name}_{split}.nc").stat().st_size / 1e6
            worst = max(worst, cold)
            print(f"{name:<16} {split:<6} {shape:<16} {size:5.2f}  {import_s:8.3f}  {cold:11.3f}  {min(warm):11.3f}")
    total = sum(p.stat().st_size for p in folder.glob("*.nc")) / 1e6
    print(f"total size of {folder}: {total:.2f} MB (target < 20 MB)")
    print(f"slowest cold load (after import): {worst:.3f} s (target < 1 s)")
    text_table_speed(rows)


if __name__ == "__main__":
    main()

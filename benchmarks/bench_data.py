"""Data benchmarks: load time of every shipped split (target < 1 s) and the size of data/.

Run:  python benchmarks/bench_data.py

Prints, per split: the first load in a fresh Python process (import of dsident.datasets
and xarray included, measured separately), and the best of 5 warm loads in this process. Also
the file sizes and the total size of the data folder (target < 20 MB).
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


def main() -> None:
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


if __name__ == "__main__":
    main()

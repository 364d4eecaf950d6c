"""Peak memory of `lyapunov_spectrum` on a wide model: Jacobians streamed in batches vs all at once.

Until session 27 the spectrum of a model held every one-step Jacobian at once, T·M² doubles: the
late free-run analysis of an ECG rPLRNN cell (M = 200, 22 000 steps) took 7 GB, and at M = 300
(16 GB) a fit running beside another was killed for memory. Now the Jacobians are evaluated a
batch of at most 64 MiB at a time, as the QR loop consumes them.

Each route runs in a fresh process, on the same rPLRNN (``PLRNN(M)``, no inputs) and the same
run of ``--steps`` steps (its own path, ``path=``). Printed: the peak resident memory each
route adds over the process before the call, their ratio, the wall time, and the largest
difference between the two spectra (the same arithmetic, so zero or round-off).

Run: ``python benchmarks/bench_lyapunov_memory.py`` (``--latent-dim``, ``--steps``).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def one_route(route: str, latent_dim: int, steps: int) -> dict[str, object]:
    """Fit nothing: build the model, run it, and measure one spectrum (called in a child process)."""
    import torch

    from dsident import StateSpaceModel
    from dsident.analysis import lyapunov as lyap
    from dsident.dynamics import PLRNN
    from dsident.observations import Gaussian

    torch.set_num_threads(1)
    model = StateSpaceModel(PLRNN(latent_dim, seed=0), Gaussian(3, latent_dim))
    run = model.generate(steps, seed=0)["z"].values[0]
    if not np.isfinite(run).all():
        raise RuntimeError("the untrained model's run diverged; try another --latent-dim")
    if route == "all at once":
        lyap._JACOBIAN_BATCH_BYTES = 2**62       # one batch of every step, as before session 27
        batch_size = steps
    else:
        batch_size = 4_096
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    spectrum = lyap.lyapunov_spectrum(model, z0=run[0], n_steps=steps - steps // 10, transient=steps // 10,
                                      path=run, n_exponents=3, batch_size=batch_size)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss       # KiB on Linux
    return {"added_mib": (peak - before) / 1024, "wall_s": wall, "spectrum": spectrum.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latent-dim", type=int, default=200)
    parser.add_argument("--steps", type=int, default=6_000)
    parser.add_argument("--child", choices=["streamed", "all at once"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_route(args.child, args.latent_dim, args.steps)))
        return
    results = {}
    for route in ("streamed", "all at once"):
        out = subprocess.run([sys.executable, __file__, "--child", route, "--latent-dim", str(args.latent_dim),
                              "--steps", str(args.steps)], capture_output=True, text=True, check=True)
        results[route] = json.loads(out.stdout.strip().splitlines()[-1])
    held = args.steps * args.latent_dim ** 2 * 8 / 2**20
    print(f"rPLRNN M = {args.latent_dim}, {args.steps} steps (all Jacobians as doubles: {held:.0f} MiB)")
    print("| route | peak memory added (MiB) | wall (s) |")
    print("|---|---|---|")
    for route, r in results.items():
        print(f"| {route} | {r['added_mib']:.0f} | {r['wall_s']:.1f} |")
    a, b = results["streamed"], results["all at once"]
    ratio = b["added_mib"] / max(a["added_mib"], 1.0)
    diff = float(np.max(np.abs(np.subtract(a["spectrum"], b["spectrum"]))))
    print(f"memory ratio (all at once / streamed): {ratio:.1f}x; time ratio {b['wall_s'] / a['wall_s']:.2f}; "
          f"largest spectrum difference {diff:.1e}")


if __name__ == "__main__":
    main()

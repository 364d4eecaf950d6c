"""Speed of one training update of the (shallow) PLRNN: the fused rollout against autograd.

For the shapes of the benchmark cells (batch 16; the shallow PLRNN by teacher forcing on
Lorenz-63: M = 3, H = 100, windows of 100; bursting neuron: M = 6, H = 400, windows of 200;
ECG: M = 5, H = 250, windows of 200; the quick preset's BPTT: M = 3, H = 100, free-running
windows of 30; the rPLRNN by teacher forcing through a linear readout (one projector) on
Lorenz-63: M = 50, windows of 100; ECG: M = 20, windows of 200) it times one
update's loss and backward pass with the fused rollout (``dsident.inference.fused_rollout``, the
default) and with autograd recording every step (``fused=False``), best of ``--repeat`` rounds
of ``--updates`` updates each, in the same run, and prints the ratio and the largest relative
difference between the two gradients.

It then times the search for the patterns of observed channels that every update of a linear
readout's teacher makes (:func:`dsident.inference.forcing_alpha.mask_patterns` against
``torch.unique(dim=0)``, which it replaced, on a window of 16 × 100 samples), and one forced step
of the step-by-step route through one projector (``TeacherSignal.force`` against the batched
einsum it replaced).

Run: ``python benchmarks/bench_fused_rollout.py`` (one torch thread, as the benchmark cells;
``--threads`` to change it). ``--device cuda`` times the same updates on a GPU (synchronised
before the clock stops) and ``--batch-size`` sets the windows per update (default 16, the
cells' own).
"""
from __future__ import annotations

import argparse

import torch
from _timing import best_of

from dsident import StateSpaceModel
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.inference.bptt import free_run
from dsident.inference.forcing_alpha import make_teacher
from dsident.inference.teacher_forcing import teacher_forcing_loss
from dsident.inference.windows import Batch
from dsident.observations import Gaussian

CASES = {  # name: (channels, latent_dim, hidden_dim (None: the PLRNN), window, alpha (None: BPTT's free run))
    "TF lorenz63 quick cell": (3, 3, 100, 100, 0.3),
    "TF bursting neuron cell": (3, 6, 400, 200, 0.25),
    "TF ecg cell": (5, 5, 250, 200, 0.1),
    "BPTT lorenz63 quick": (3, 3, 100, 30, None),
    "TF lorenz63 rPLRNN cell": (3, 50, None, 100, 0.1),
    "TF ecg rPLRNN cell": (5, 20, None, 200, 0.1),
}


def case_model(channels: int, latent_dim: int, hidden_dim: int | None) -> StateSpaceModel:
    """The benchmark cell's model: a clipped shallow PLRNN read directly, or a PLRNN behind a
    linear readout."""
    if hidden_dim is None:
        return StateSpaceModel(PLRNN(latent_dim, penalty="none", seed=0),
                               Gaussian(channels, latent_dim, readout="linear"))
    return StateSpaceModel(ShallowPLRNN(latent_dim, hidden_dim, clip=True, seed=0),
                           Gaussian(channels, latent_dim, readout="identity"))


def one_update(model: StateSpaceModel, x: torch.Tensor, mask: torch.Tensor, alpha: float | None,
               fused: bool) -> None:
    model.zero_grad()
    if alpha is None:
        z = free_run(model, Batch(x=x, mask=mask, u=None, dt=None), "invert", fused=fused)
        loss = (model.decode(z) - x).square().mean()
    else:
        teacher = make_teacher(model.observation, x, mask)
        loss, _ = teacher_forcing_loss(model, x, mask, alpha=alpha, teacher=teacher, fused=fused)
    loss.backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch finds no CUDA device")
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"{args.threads} CPU thread(s)"
    print(f"one update (loss + backward), batch {args.batch_size}, {torch.get_default_dtype()}, {where}, "
          f"best of {args.repeat} × {args.updates}")
    print(f"{'case':<24} | {'fused ms':>8} | {'autograd ms':>11} | {'ratio':>6} | max rel. Δ grad")
    for name, (n, m, h, length, alpha) in CASES.items():
        model = case_model(n, m, h).to(device)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(args.batch_size, length, n, generator=gen).to(device)
        mask = torch.ones_like(x, dtype=torch.bool)
        grads, times = {}, {}
        for fused in (True, False):
            updates = lambda: ([one_update(model, x, mask, alpha, fused) for _ in range(args.updates)], sync())  # noqa: E731
            times[fused] = best_of(updates, args.repeat)[0] / args.updates
            grads[fused] = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        diff = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
                   for a, b in zip(grads[True], grads[False]))
        print(f"{name:<24} | {1e3 * times[True]:8.1f} | {1e3 * times[False]:11.1f} | "
              f"{times[False] / times[True]:5.1f}× | {diff:.1e}")

    bench_patterns(args.repeat)
    bench_force(args.repeat)


def bench_force(repeat: int, calls: int = 500) -> None:
    """One forced step through one projector (the step-by-step route of the continuous-time models
    behind a linear readout), forward and backward: ``TeacherSignal.force`` against the batched
    einsum it used before."""
    from dsident.inference.forcing_alpha import TeacherSignal

    for m in (8, 16):
        gen = torch.Generator().manual_seed(0)
        teacher = TeacherSignal(z_hat=torch.randn(16, 3, m, generator=gen),
                                projector=torch.randn(1, m, m, generator=gen), pattern=torch.zeros(16, 3, dtype=torch.long))
        z = torch.randn(16, m, generator=gen, requires_grad=True)

        def einsum_step() -> None:
            (z + 0.2 * torch.einsum("bij,bj->bi", teacher.projector[0][None], teacher.z_hat[:, 1] - z)).sum().backward()

        times = {name: best_of(lambda: [fn() for _ in range(calls)], repeat)[0] / calls
                 for name, fn in (("force", lambda: teacher.force(z, 1, 0.2).sum().backward()),
                                  ("einsum", einsum_step))}
        print(f"one forced step through one projector, batch 16, M {m}, forward + backward: "
              f"{1e6 * times['force']:.0f} µs vs einsum {1e6 * times['einsum']:.0f} µs "
              f"({times['einsum'] / times['force']:.1f}×)")


def bench_patterns(repeat: int, calls: int = 200) -> None:
    from dsident.inference.forcing_alpha import mask_patterns

    mask = torch.ones(16 * 100, 3, dtype=torch.bool)
    mask[::7, 1] = False                                    # two patterns, as with a gappy channel
    times = {}
    for name, fn in (("codes", lambda: mask_patterns(mask)),
                     ("unique(dim=0)", lambda: torch.unique(mask, dim=0, return_inverse=True))):
        times[name] = best_of(lambda: [fn() for _ in range(calls)], repeat)[0] / calls
    print(f"patterns of observed channels, 1 600 rows: {1e3 * times['codes']:.2f} ms vs torch.unique(dim=0) "
          f"{1e3 * times['unique(dim=0)']:.2f} ms ({times['unique(dim=0)'] / times['codes']:.0f}×)")


if __name__ == "__main__":
    main()

"""The latent-dynamics interface every model in :mod:`dsident.dynamics` implements.

A latent dynamics is a ``torch.nn.Module`` that maps a batch of latent states one sampling
step forward (the *transition mean*; process noise is added by
:class:`dsident.StateSpaceModel`). Continuous-time models implement :meth:`vector_field`
and integrate it with a solver from :mod:`dsident.dynamics.solvers`; the rest of the package
only ever calls :meth:`step` (and :meth:`~LatentDynamics.rollout` for a noise-free autonomous
run, which a model may write in place for speed).

Shape legend: ``B`` batch (trials), ``M`` latent_dim, ``K`` input_dim.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor, nn

#: name -> class, filled by ``LatentDynamics.__init_subclass__``; used by ``StateSpaceModel.load``.
DYNAMICS_REGISTRY: dict[str, type["LatentDynamics"]] = {}
#: a run stops early once every trial has become non-finite, checked every this many steps
DIVERGENCE_CHECK_EVERY = 50


def run_steps(z0: Tensor, n_steps: int, step_into: Callable[[int, Tensor, Tensor], Any]) -> Tensor:
    """``z0`` followed by ``n_steps − 1`` steps of ``step_into(t, z, dest)`` (writes the state of
    step ``t`` into ``dest``), in a time-major buffer.

    Parameters
    ----------
    z0 : Tensor of shape (B, M)
    n_steps : int
        States returned, ``z0`` included.
    step_into : callable
        The step into time ``t`` from ``z`` (B, M), written into ``dest`` (B, M).

    Returns
    -------
    Tensor of shape (B, n_steps, M)
        NaN after the step at which every trial had become non-finite (checked every
        :data:`DIVERGENCE_CHECK_EVERY` steps), so that a diverging run costs little.
    """
    out = z0.new_full((n_steps, *z0.shape), float("nan"))
    out[0] = z0
    for t in range(1, n_steps):
        step_into(t, out[t - 1], out[t])
        if t % DIVERGENCE_CHECK_EVERY == 0 and not bool(torch.isfinite(out[t]).all(-1).any()):
            break
    return out.transpose(0, 1).contiguous()


def check_state(z: Tensor, latent_dim: int, u: Tensor | None = None) -> None:
    """ValueError naming ``z`` when its last dimension is not ``latent_dim``, or naming ``u`` when it
    has another number of rows than ``z`` (B, M) (one row, shared by every state, is allowed).
    Shapes only, so no device synchronisation on the per-step path."""
    if z.dim() == 0 or z.shape[-1] != latent_dim:
        raise ValueError(f"`z` must have a last (latent) dimension of size latent_dim={latent_dim}; "
                         f"got shape {tuple(z.shape)}.")
    if u is not None and z.dim() == 2 and u.dim() == 2 and u.shape[0] not in (1, z.shape[0]):
        raise ValueError(f"`u` must have one row per state in `z` ({z.shape[0]}); got shape {tuple(u.shape)}.")


class LatentDynamics(nn.Module):
    """Base class of all latent dynamics.

    Subclasses store every constructor argument under the same attribute name (so that
    :meth:`config` can rebuild them) and implement :meth:`step`.

    Attributes
    ----------
    latent_dim : int
        M, the size of the latent state.
    input_dim : int
        K, the size of the external input ``u`` (0 when the model takes none).
    piecewise_linear : bool
        True for models whose step is ``A z + W relu(z) + C u + h`` (Laplace-EM applies).
    """

    piecewise_linear: ClassVar[bool] = False
    latent_dim: int
    input_dim: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        DYNAMICS_REGISTRY[cls.__name__] = cls

    # -- the interface ------------------------------------------------------------------
    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """Transition mean: one sampling step forward.

        Parameters
        ----------
        z : Tensor of shape (B, M)
        u : Tensor of shape (B, K) or None
            External input at the *new* time step (``s_t`` in the PLRNN paper's eq. 1).
        dt : float, Tensor of shape (B, 1), or None
            Sampling step in the unit of the data's time coordinate; a tensor gives every
            trial its own step. Discrete-time models ignore it.

        Returns
        -------
        Tensor of shape (B, M)
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    @torch.no_grad()
    def rollout(self, z0: Tensor, n_steps: int, dt: float | None = None) -> Tensor:
        """A noise-free run without inputs: ``z0`` and ``n_steps − 1`` steps of :meth:`step`.

        Subclasses may override it with an in-place loop that gives the same numbers (the
        PLRNNs do); :meth:`dsident.StateSpaceModel.generate` calls it for every run without
        noise or inputs.

        Parameters
        ----------
        z0 : Tensor of shape (B, M)
        n_steps : int
            States returned, ``z0`` included.
        dt : float, optional
            Sampling step passed to :meth:`step`.

        Returns
        -------
        Tensor of shape (B, n_steps, M)
            No gradient; NaN after the step at which every trial had become non-finite
            (:func:`run_steps`).
        """
        return run_steps(z0, n_steps, lambda t, z, dest: dest.copy_(self.step(z, None, dt)))

    def jacobian(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """d step(z) / d z, shape (B, M, M). Autograd fallback; subclasses override analytically."""
        def single(zi: Tensor, ui: Tensor | None, dti: Tensor | float | None) -> Tensor:
            return self.step(zi[None], None if ui is None else ui[None],
                             dti if (dti is None or isinstance(dti, float)) else dti[None])[0]

        jac = torch.func.jacrev(single, argnums=0)
        if u is None and not isinstance(dt, Tensor):
            return torch.func.vmap(lambda zi: jac(zi, None, dt))(z)
        uu = u if u is not None else torch.zeros(z.shape[0], 0, dtype=z.dtype, device=z.device)
        dd = dt if isinstance(dt, Tensor) else torch.full((z.shape[0], 1), float(dt or 1.0), dtype=z.dtype, device=z.device)
        return torch.func.vmap(lambda zi, ui, di: jac(zi, ui if u is not None else None,
                                                      di if isinstance(dt, Tensor) else dt))(z, uu, dd)

    def _inputs(self, z: Tensor, u: Tensor | None) -> Tensor | None:
        """Inputs checked against ``input_dim``: None for input-free models, zeros when ``u`` is
        None, else ``u`` (B, K) after checking its width."""
        if self.input_dim == 0:
            return None
        if u is None:
            return torch.zeros(z.shape[0], self.input_dim, dtype=z.dtype, device=z.device)
        if u.shape[-1] != self.input_dim:
            raise ValueError(f"`u` must have {self.input_dim} input channels; got shape {tuple(u.shape)}.")
        return u

    def regularization(self) -> Tensor:
        """Penalty added to the training loss (e.g. the manifold-attractor term). Default 0."""
        p = next(self.parameters(), None)
        return torch.zeros((), dtype=p.dtype if p is not None else torch.get_default_dtype())

    # -- serialisation ------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """JSON-serialisable constructor arguments: ``type(self)(**self.config())`` rebuilds it."""
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name in sig.parameters
                if name != "self" and sig.parameters[name].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                        inspect.Parameter.VAR_KEYWORD)}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.config().items())

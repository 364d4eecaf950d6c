"""The observation-model interface shared by every likelihood in :mod:`dsident.observations`.

An observation model is a likelihood (Gaussian, Poisson, Bernoulli, Categorical) composed
with a readout (identity, linear ``B z + b``, ReLU ``B relu(z)``); there is no class per pair.

Shape legend: ``...`` any leading dims (e.g. trial, time), ``N`` obs_dim, ``M`` latent_dim.
Masks are boolean with True = observed; masked entries contribute nothing to ``log_prob`` or
its derivatives (missing samples are never filled).
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any

import torch
from torch import Tensor, nn

#: name -> class, filled by ``ObservationModel.__init_subclass__``; used by ``StateSpaceModel.load``.
OBSERVATION_REGISTRY: dict[str, type["ObservationModel"]] = {}


def _warn_autograd(cls: type, what: str) -> None:
    # Python's default warning filter already shows a given warning once per call site
    warnings.warn(f"{cls.__name__} has no analytic {what} of log_prob; using autograd, which makes "
                  "Laplace-EM slower. Override grad_log_prob/hess_log_prob to avoid it.",
                  RuntimeWarning, stacklevel=3)


def draws_observations(model: Any) -> bool:
    """Whether a model's free runs are read as draws of its observation model rather than its
    mean: for counts and classes (``observation.discrete``), whose data are draws too. ``model``:
    a fitted estimator (its ``model_``), a StateSpaceModel, or anything else (False). The one
    rule behind :func:`dsident.metrics.evaluate`'s default and ``dsident generate``'s."""
    fitted = model.model_ if hasattr(model, "model_") else model
    return bool(getattr(getattr(fitted, "observation", None), "discrete", False))


class ObservationModel(nn.Module):
    """Base class of all observation models.

    Subclasses store every constructor argument under the same attribute name (so that
    :meth:`config` can rebuild them).

    Attributes
    ----------
    obs_dim : int
        N, number of observed channels.
    latent_dim : int
        M, size of the latent state it reads from.
    discrete : bool
        The observations are counts or classes (Poisson, Bernoulli, Categorical). A free run of
        such a model is scored by draws of the observation model, not by its mean: the data are
        draws too, and an expected count never equals an observed one
        (:func:`dsident.metrics.evaluate`).
    """

    obs_dim: int
    latent_dim: int
    discrete: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # intermediate base classes set ``_abstract = True`` in their own body and stay out
        if not cls.__dict__.get("_abstract", False):
            OBSERVATION_REGISTRY[cls.__name__] = cls

    def log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """log p(x | z) summed over observed channels: x (..., N), z (..., M) -> (...)."""
        raise NotImplementedError(f"{type(self).__name__} must implement log_prob()")

    def mean(self, z: Tensor) -> Tensor:
        """E[x | z]: (..., M) -> (..., N)."""
        raise NotImplementedError(f"{type(self).__name__} must implement mean()")

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """x ~ p(x | z): (..., M) -> (..., N)."""
        raise NotImplementedError(f"{type(self).__name__} must implement sample()")

    def init_from_data(self, x: Tensor, mask: Tensor | None = None) -> "ObservationModel":
        """Initialise the readout from data x (T, N) or (trial, time, N), e.g. by PCA; returns self."""
        return self

    def invert(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """A latent state consistent with x: (..., N) -> (..., M) (least-squares / pseudo-inverse).

        Used to start generation and n-step prediction from data and as the teacher signal.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement invert()")

    def grad_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """d log p(x|z) / dz, (..., M). Autograd fallback; subclasses override analytically."""
        _warn_autograd(type(self), "gradient")
        zz = z.detach().requires_grad_(True)
        with torch.enable_grad():
            lp = self.log_prob(x, zz, mask).sum()
            (g,) = torch.autograd.grad(lp, zz)
        return g

    def hess_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """d² log p(x|z) / dz², (..., M, M). Autograd fallback; subclasses override analytically."""
        _warn_autograd(type(self), "Hessian")
        lead = z.shape[:-1]
        xf, zf = x.reshape(-1, x.shape[-1]), z.reshape(-1, z.shape[-1])
        mf = None if mask is None else mask.reshape(-1, mask.shape[-1])

        def f(zi: Tensor, xi: Tensor, mi: Tensor | None) -> Tensor:
            return self.log_prob(xi, zi, mi)

        if mf is None:
            h = torch.func.vmap(torch.func.hessian(lambda zi, xi: f(zi, xi, None)))(zf, xf)
        else:
            h = torch.func.vmap(torch.func.hessian(f))(zf, xf, mf)
        return h.reshape(*lead, z.shape[-1], z.shape[-1])

    def fisher_information(self, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """E_x[-d² log p(x|z) / dz²], (..., M, M). Default: minus the Hessian at x = mean(z).

        Exact for Gaussian likelihoods; subclasses with other likelihoods override it.
        """
        return -self.hess_log_prob(self.mean(z).detach(), z, mask)

    def config(self) -> dict[str, Any]:
        """JSON-serialisable constructor arguments: ``type(self)(**self.config())`` rebuilds it."""
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name in sig.parameters
                if name != "self" and sig.parameters[name].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                        inspect.Parameter.VAR_KEYWORD)}

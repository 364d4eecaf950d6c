"""Variational guides q(z | x) for the SVI engine, and their registry.

Shape legend: ``B`` trials (or windows), ``T`` time steps, ``M`` latent_dim, ``N`` obs_dim,
``K`` input_dim, ``H`` encoder features (2 × ``hidden_dim``, forward and backward).

Both guides read the observations through the same :class:`Encoder`, a bidirectional GRU
over ``[standardised x · mask, mask, u]``, so the features at time t summarise the whole
window, past and future. Missing entries reach the encoder as 0 together with a mask flag
that says so; they never enter a likelihood.

``"markov"``
    Structured, deep-Markov-model style (Krishnan et al., AAAI 2017):
    ``q(z | x) = q(z_1 | h_1) prod_t q(z_t | z_{t-1}, h_t)``, Gaussian conditionals whose mean
    and scale come from a *combiner* of the previous state and the encoder features. The mean
    has a linear path ``G z_{t-1}`` beside the nonlinear one, so the guide contains the exact
    posterior of a linear-Gaussian model.
``"mean-field"``
    ``q(z | x) = prod_t N(z_t; mu_t(h_t), diag(s_t(h_t)^2))``: independent in time; cheaper to
    sample (no sequential loop), and its marginal means and variances are exact.

Guides are ``torch.nn.Module`` objects owned by the fit, not entries of pyro's global
parameter store, so several fits never share or overwrite each other's parameters.
"""
from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from typing import Any

import pyro
import pyro.distributions as pdist
import torch
from pyro import poutine
from pyro.distributions import constraints
from torch import Tensor, nn
from torch.nn.functional import softplus
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .pyro_model import Batch, normal_log_density

#: smallest posterior standard deviation a guide may report (keeps log densities finite).
MIN_SCALE = 1e-4
#: softplus^{-1}(0.3): the posterior scales start near 0.3 (in latent units).
_SCALE_BIAS = math.log(math.expm1(0.3))


class Encoder(nn.Module):
    """Bidirectional GRU over a window: features ``h(B, T, 2 * hidden_dim)``.

    Parameters
    ----------
    obs_dim, input_dim : int
        N and K.
    hidden_dim : int
        GRU units per direction.
    x_mean, x_scale : Tensor of shape (N,)
        Per-channel location and scale used to standardise the observations before the GRU
        (stored as buffers so that they move with the module and are checkpointed).
    """

    def __init__(self, obs_dim: int, input_dim: int, hidden_dim: int,
                 x_mean: Tensor | None = None, x_scale: Tensor | None = None) -> None:
        super().__init__()
        self.obs_dim, self.input_dim, self.hidden_dim = obs_dim, input_dim, hidden_dim
        self.register_buffer("x_mean", torch.zeros(obs_dim) if x_mean is None else x_mean.clone())
        self.register_buffer("x_scale", torch.ones(obs_dim) if x_scale is None else x_scale.clone())
        self.rnn = nn.GRU(2 * obs_dim + input_dim, hidden_dim, batch_first=True, bidirectional=True)

    @property
    def feature_dim(self) -> int:
        return 2 * self.hidden_dim

    def forward(self, batch: Batch) -> Tensor:
        """Encoder features of every time step, (B, T, H); zero past each trial's end."""
        maskf = batch.mask.to(batch.x.dtype)
        # where, not a product: an unobserved entry holding NaN or inf must not reach the GRU
        xs = torch.where(batch.mask, (batch.x - self.x_mean) / self.x_scale, torch.zeros_like(batch.x))
        parts = [xs, maskf] + ([batch.u] if self.input_dim else [])
        inp = torch.cat(parts, -1)
        lengths = batch.time_mask.sum(-1)
        if bool((lengths < inp.shape[1]).any()):
            # Ragged trials: pack, so the backward direction starts at each trial's own end.
            packed = pack_padded_sequence(inp, lengths.clamp(min=1).cpu(), batch_first=True,
                                          enforce_sorted=False)
            out, _ = self.rnn(packed)
            h, _ = pad_packed_sequence(out, batch_first=True, total_length=inp.shape[1])
        else:
            h, _ = self.rnn(inp)
        return h


class _Gaussian(nn.Module):
    """Linear head: features (..., F) -> (loc, scale) of a diagonal Gaussian in latent space."""

    def __init__(self, in_dim: int, latent_dim: int) -> None:
        super().__init__()
        self.loc = nn.Linear(in_dim, latent_dim)
        self.scale = nn.Linear(in_dim, latent_dim)
        nn.init.zeros_(self.scale.weight)
        nn.init.constant_(self.scale.bias, _SCALE_BIAS)

    def forward(self, a: Tensor) -> tuple[Tensor, Tensor]:
        return self.loc(a), softplus(self.scale(a)) + MIN_SCALE

    @torch.no_grad()
    def start_scale_at(self, scale: Tensor) -> None:
        """Make the head's scale start at ``scale`` (M,) whatever the features (zero weights)."""
        target = (scale.to(self.scale.bias) - MIN_SCALE).clamp(min=MIN_SCALE)
        self.scale.weight.zero_()
        self.scale.bias.copy_(target + torch.log(-torch.expm1(-target)))      # softplus^{-1}


class Combiner(nn.Module):
    """``(z_{t-1}, h_t) -> (loc_t, scale_t)`` of q(z_t | z_{t-1}, x).

    ``a_t = tanh(U z_{t-1} + V h_t + c)``, ``loc_t = G z_{t-1} + head_loc(a_t)``,
    ``scale_t = softplus(head_scale(a_t))``. ``V h_t + c`` is computed for all t at once
    (:meth:`project`), so the sequential loop only does the small ``U z`` and heads.
    """

    def __init__(self, latent_dim: int, feature_dim: int, combiner_dim: int) -> None:
        super().__init__()
        self.from_state = nn.Linear(latent_dim, combiner_dim, bias=False)
        self.from_features = nn.Linear(feature_dim, combiner_dim)
        self.linear_path = nn.Linear(latent_dim, latent_dim, bias=False)
        self.head = _Gaussian(combiner_dim, latent_dim)

    def project(self, h: Tensor) -> Tensor:
        return self.from_features(h)

    def forward(self, z_prev: Tensor, projected: Tensor) -> tuple[Tensor, Tensor]:
        a = torch.tanh(self.from_state(z_prev) + projected)
        loc, scale = self.head(a)
        return self.linear_path(z_prev) + loc, scale


class MarkovPosterior(pdist.TorchDistribution):
    """q(z | x) of the Markov guide over whole paths: ``batch_shape (B,)``, ``event_shape (T, M)``.

    :meth:`rsample` draws a path by ancestral sampling (sequential in t, reparameterized);
    :meth:`log_prob` evaluates all conditionals of a given path at once.
    """

    arg_constraints: dict = {}
    support = constraints.independent(constraints.real, 2)
    has_rsample = True

    def __init__(self, guide: "MarkovGuide", features: Tensor, time_mask: Tensor,
                 generator: torch.Generator | None = None, validate_args: bool | None = None) -> None:
        self.guide, self.time_mask, self.generator = guide, time_mask, generator
        self.projected = guide.combiner.project(features)          # (B, T, C)
        self.loc0, self.scale0 = guide.initial(features[:, 0])       # (B, M) each
        b, t = time_mask.shape
        super().__init__(torch.Size([b]), torch.Size([t, guide.latent_dim]), validate_args=validate_args)

    def rsample(self, sample_shape: torch.Size = torch.Size()) -> Tensor:
        n = torch.Size(sample_shape).numel()
        b, t, m = self.batch_shape[0], self.event_shape[0], self.event_shape[1]
        eps = torch.randn((n, b, t, m), generator=self.generator, dtype=self.loc0.dtype, device=self.loc0.device)
        # samples are a leading dim that broadcasts against the (B, ...) features: no copies
        z = self.loc0 + self.scale0 * eps[:, :, 0]                  # (n, B, M)
        path = [z]
        for i in range(1, t):
            loc, scale = self.guide.combiner(z, self.projected[:, i])
            z = loc + scale * eps[:, :, i]
            path.append(z)
        return torch.stack(path, 2).reshape(torch.Size(sample_shape) + self.batch_shape + self.event_shape)

    @torch.no_grad()
    def moments(self, n_samples: int) -> tuple[Tensor, Tensor]:
        """Monte Carlo marginal means and variances (B, T, M) from ``n_samples`` paths.

        The paths are never stored: each step adds to running sums (float64), so memory is
        O(B T M) whatever ``n_samples``, and long recordings can be smoothed in one pass.
        """
        b, t, m = self.batch_shape[0], self.event_shape[0], self.event_shape[1]
        kw = {"dtype": self.loc0.dtype, "device": self.loc0.device}
        mean = torch.empty((b, t, m), dtype=torch.float64, device=self.loc0.device)
        var = torch.empty_like(mean)

        def record(i: int, z: Tensor) -> None:
            zd = z.double()
            mu = zd.mean(0)
            mean[:, i] = mu
            var[:, i] = ((zd - mu) ** 2).sum(0) / max(n_samples - 1, 1)

        z = self.loc0 + self.scale0 * torch.randn((n_samples, b, m), generator=self.generator, **kw)
        record(0, z)
        for i in range(1, t):
            loc, scale = self.guide.combiner(z, self.projected[:, i])
            z = loc + scale * torch.randn((n_samples, b, m), generator=self.generator, **kw)
            record(i, z)
        return mean, var

    def log_prob(self, z: Tensor) -> Tensor:
        lp = normal_log_density(z[..., 0, :], self.loc0, self.scale0.log()).sum(-1)
        if z.shape[-2] > 1:
            loc, scale = self.guide.combiner(z[..., :-1, :], self.projected[..., 1:, :])
            terms = normal_log_density(z[..., 1:, :], loc, scale.log()).sum(-1)
            lp = lp + torch.where(self.time_mask[..., 1:], terms, torch.zeros_like(terms)).sum(-1)
        return lp


class MeanFieldPosterior(pdist.TorchDistribution):
    """q(z | x) = prod_t N(loc_t, diag(scale_t^2)) over whole paths, masked past each trial's end."""

    arg_constraints: dict = {}
    support = constraints.independent(constraints.real, 2)
    has_rsample = True

    def __init__(self, loc: Tensor, scale: Tensor, time_mask: Tensor,
                 generator: torch.Generator | None = None, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.time_mask, self.generator = loc, scale, time_mask, generator
        super().__init__(loc.shape[:1], loc.shape[1:], validate_args=validate_args)

    def rsample(self, sample_shape: torch.Size = torch.Size()) -> Tensor:
        shape = torch.Size(sample_shape) + self.loc.shape
        eps = torch.randn(shape, generator=self.generator, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * eps

    def log_prob(self, z: Tensor) -> Tensor:
        terms = normal_log_density(z, self.loc, self.scale.log()).sum(-1)
        return torch.where(self.time_mask, terms, torch.zeros_like(terms)).sum(-1)


class Guide(nn.Module, metaclass=ABCMeta):
    """Base class of the guides: an encoder plus a posterior over latent paths.

    Subclasses implement :meth:`posterior`, :meth:`start_scales_at` and :meth:`marginals`. Calling the guide as a pyro guide
    (:meth:`pyro_guide`) samples site ``"z"`` under the trial plate with the KL scale.
    """

    name: str = ""

    def __init__(self, latent_dim: int, obs_dim: int, input_dim: int = 0, *, hidden_dim: int = 64,
                 x_mean: Tensor | None = None, x_scale: Tensor | None = None) -> None:
        super().__init__()
        self.latent_dim, self.obs_dim, self.input_dim, self.hidden_dim = latent_dim, obs_dim, input_dim, hidden_dim
        self.encoder = Encoder(obs_dim, input_dim, hidden_dim, x_mean, x_scale)

    @abstractmethod
    def posterior(self, batch: Batch, generator: torch.Generator | None = None) -> pdist.TorchDistribution:
        """The distribution q(z | x) of the batch's paths (batch_shape (B,), event_shape (T, M))."""

    def pyro_guide(self, batch: Batch, kl_scale: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
        """The pyro guide matching :func:`~dsident.inference.svi.pyro_model.svi_model`."""
        with pyro.plate("trial", batch.x.shape[0], dim=-1):
            with poutine.scale(scale=kl_scale):
                return pyro.sample("z", self.posterior(batch, generator))

    @abstractmethod
    def start_scales_at(self, transition_sd: Tensor, initial_sd: Tensor) -> None:
        """Start the posterior scales at the prior's: ``transition_sd`` (M,) for the steps after
        the first, ``initial_sd`` (M,) for the first, so that the first KL terms are moderate
        even when the process noise is far from the default scale."""

    @abstractmethod
    def marginals(self, batch: Batch, *, n_samples: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Posterior marginal means and variances, each (B, T, M).

        Subclasses without closed-form marginals estimate them from ``n_samples`` paths.
        """

    def config(self) -> dict[str, Any]:
        """Constructor arguments (without the standardisation buffers, which the state dict holds)."""
        return {"latent_dim": self.latent_dim, "obs_dim": self.obs_dim, "input_dim": self.input_dim,
                "hidden_dim": self.hidden_dim}


class MarkovGuide(Guide):
    """Structured Markov guide q(z_t | z_{t-1}, x) with a bidirectional-GRU encoder and a combiner.

    Parameters
    ----------
    latent_dim, obs_dim, input_dim : int
        M, N, K.
    hidden_dim : int
        GRU units per direction.
    combiner_dim : int
        Width of the combiner's hidden layer.
    x_mean, x_scale : Tensor of shape (N,), optional
        Standardisation of the encoder's input.
    """

    name = "markov"

    def __init__(self, latent_dim: int, obs_dim: int, input_dim: int = 0, *, hidden_dim: int = 64,
                 combiner_dim: int = 64, x_mean: Tensor | None = None, x_scale: Tensor | None = None) -> None:
        super().__init__(latent_dim, obs_dim, input_dim, hidden_dim=hidden_dim, x_mean=x_mean, x_scale=x_scale)
        self.combiner_dim = combiner_dim
        feat = self.encoder.feature_dim
        # q(z_1 | x): the initial state of every window comes from the encoder.
        self.initial = nn.Sequential(nn.Linear(feat, combiner_dim), nn.Tanh(), _Gaussian(combiner_dim, latent_dim))
        self.combiner = Combiner(latent_dim, feat, combiner_dim)

    def posterior(self, batch: Batch, generator: torch.Generator | None = None) -> MarkovPosterior:
        return MarkovPosterior(self, self.encoder(batch), batch.time_mask, generator)

    def start_scales_at(self, transition_sd: Tensor, initial_sd: Tensor) -> None:
        self.combiner.head.start_scale_at(transition_sd)
        self.initial[-1].start_scale_at(initial_sd)

    def marginals(self, batch: Batch, *, n_samples: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Monte Carlo marginals from ``n_samples`` ancestral paths (see :meth:`MarkovPosterior.moments`)."""
        mean, var = self.posterior(batch, generator).moments(n_samples)
        return mean.to(batch.x.dtype), var.to(batch.x.dtype)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "combiner_dim": self.combiner_dim}


class MeanFieldGuide(Guide):
    """Mean-field Gaussian guide: independent q(z_t | x) from the bidirectional-GRU encoder.

    Parameters
    ----------
    latent_dim, obs_dim, input_dim : int
        M, N, K.
    hidden_dim : int
        GRU units per direction.
    x_mean, x_scale : Tensor of shape (N,), optional
        Standardisation of the encoder's input.
    """

    name = "mean-field"

    def __init__(self, latent_dim: int, obs_dim: int, input_dim: int = 0, *, hidden_dim: int = 64,
                 x_mean: Tensor | None = None, x_scale: Tensor | None = None) -> None:
        super().__init__(latent_dim, obs_dim, input_dim, hidden_dim=hidden_dim, x_mean=x_mean, x_scale=x_scale)
        self.head = _Gaussian(self.encoder.feature_dim, latent_dim)

    def posterior(self, batch: Batch, generator: torch.Generator | None = None) -> MeanFieldPosterior:
        loc, scale = self.head(self.encoder(batch))
        return MeanFieldPosterior(loc, scale, batch.time_mask, generator)

    def start_scales_at(self, transition_sd: Tensor, initial_sd: Tensor) -> None:
        self.head.start_scale_at(transition_sd)

    def marginals(self, batch: Batch, *, n_samples: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Exact marginals: the guide's own means and variances (``n_samples`` is not used)."""
        q = self.posterior(batch, generator)
        return q.loc, q.scale ** 2


#: guide name -> class; ``fit_svi(..., guide=name)`` looks names up here.
GUIDES: dict[str, type[Guide]] = {"markov": MarkovGuide, "mean-field": MeanFieldGuide}


def make_guide(name: str, *, latent_dim: int, obs_dim: int, input_dim: int = 0,
               **options: Any) -> Guide:
    """Build the guide registered under ``name`` (``ValueError`` listing :data:`GUIDES` otherwise)."""
    if not isinstance(name, str) or name not in GUIDES:
        raise ValueError(f"`guide` must be one of {sorted(GUIDES)}; got guide={name!r}.")
    cls = GUIDES[name]
    if cls is MeanFieldGuide:
        options.pop("combiner_dim", None)
    return cls(latent_dim, obs_dim, input_dim, **options)

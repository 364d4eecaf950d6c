"""The shipped benchmark sets (public face of :mod:`dsident.data.benchmarks`).

>>> from dsident import datasets
>>> [d["name"] for d in datasets.list()]
['lorenz63', 'bursting_neuron', 'ecg', 'lorenz63_spikes']
>>> train = datasets.load("lorenz63", split="train")        # doctest: +SKIP
>>> print(datasets.card("lorenz63"))                        # doctest: +SKIP

``load(name, split)`` reads a split (``"train"``/``"test"``; ``bursting_neuron`` also
``"short"``, the rPLRNN paper's short noisy trials), ``make(name)`` regenerates a set's files
with its fixed seeds, ``list()`` describes every set and ``card(name)`` prints one set's card
(source, equations, solver, dt, sizes, noise, z-score constants).
"""
from __future__ import annotations

from .data.benchmarks import DATASETS, card, data_dir, list_datasets, load, make, regenerate_head

list = list_datasets  # noqa: A001  (the public name is ``datasets.list()``)

__all__ = ["DATASETS", "card", "data_dir", "list", "load", "make", "regenerate_head"]

"""docs/main_job.md's defaults table names exactly the layers and cells that the config holds.

The table is prose per row, so only its keys are checked: which models, methods, (dataset,
model) method overrides and (dataset, model, method) cells it lists, and the method each model
and override picks. It drifted once (session 28 found ORGaNICs missing from the Lorenz-63
override row), which is what this guards against.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from dsident.experiments.config import (DATASET_METHODS, FIT_DEFAULTS, MODEL_DEFAULTS, PAIR_DEFAULTS, RECORDING_DEFAULTS,
                                        RECORDING_METHODS)

DOC = Path(__file__).resolve().parents[1] / "docs" / "main_job.md"


def _names(text: str) -> list[str]:
    """``"gnode, ltc"`` -> ``["gnode", "ltc"]``."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _table_rows() -> list[list[str]]:
    """The rows (layer, key, settings) of the table headed ``| layer | key | settings |``."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index("| layer | key | settings |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append([cells[0], cells[1], "|".join(cells[2:]).strip()])
    return rows


@pytest.fixture(scope="module")
def rows() -> list[list[str]]:
    if not DOC.exists():
        pytest.fail(f"{DOC} is missing: the defaults are documented there")
    return _table_rows()


def test_the_table_lists_every_cell_of_pair_defaults_and_no_other(rows):
    listed = set()
    for layer, key, _ in rows:
        if layer not in ("cell", "cells"):
            continue
        datasets, models, methods = (part.strip() for part in key.split("/"))
        listed |= {(d, m, k) for d in _names(datasets) for m in _names(models) for k in _names(methods)}
    assert listed == set(PAIR_DEFAULTS), (
        f"docs/main_job.md lists cells {sorted(listed - set(PAIR_DEFAULTS))} that the config lacks and "
        f"lacks {sorted(set(PAIR_DEFAULTS) - listed)}")


def test_the_table_lists_every_method_override_with_its_method(rows):
    listed = {}
    for layer, key, settings in rows:
        if not layer.startswith("method per dataset and model"):
            continue
        method = settings.split(":")[0].split(" ")[0]
        for group in key.split(";"):
            dataset, models = (part.strip() for part in group.split("/"))
            listed.update({(dataset, m): method for m in _names(models)})
    assert listed == DATASET_METHODS


def test_the_table_gives_each_model_its_default_method_and_each_engine_a_row(rows):
    models, methods = {}, set()
    for layer, key, settings in rows:
        if layer == "model":
            models.update({m: settings.split(";")[0].split(" ")[0] for m in _names(key)})
        elif layer == "method":
            methods |= set(_names(key))
    assert models == {m: d["method"] for m, d in MODEL_DEFAULTS.items()}
    assert methods == set(FIT_DEFAULTS)


def test_the_table_lists_the_recording_methods_and_cells(rows):
    from dsident.experiments.config import RECORDING_SLOW_CLIPPED

    methods, cells, clipped = {}, set(), set()
    for layer, key, settings in rows:
        if layer.startswith("method for a recording"):
            methods.update({m: settings.split(" ")[0] for m in _names(key)})
        elif layer.startswith("recording cell"):
            model, method = (part.strip() for part in key.split("/"))
            cells.add((model, method))
        elif layer.startswith("slow channels on a recording"):
            clipped |= set(_names(key))
    assert methods == RECORDING_METHODS
    assert cells == set(RECORDING_DEFAULTS)
    assert clipped == set(RECORDING_SLOW_CLIPPED)

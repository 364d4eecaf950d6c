"""Experiments: model × dataset × seed grids, sweeps on any executor, result tables.

- :mod:`~dsident.experiments.config` — the defaults per dataset/model/method (one table) and
  config files (TOML, YAML);
- :mod:`~dsident.experiments.runner` — one result folder per grid point, failures recorded,
  finished points skipped on a re-run;
- :mod:`~dsident.experiments.sweep` — grids over any setting on a process pool or Dask;
- :mod:`~dsident.experiments.tables` — the benchmark table (median ± MAD over seeds);
- :mod:`~dsident.experiments.benchmark` — ``dsident benchmark`` and its ``--quick`` preset;
- :mod:`~dsident.experiments.untrained` — the untrained baseline row;
- :mod:`~dsident.experiments.machine` — the machine each point was fitted on (CPU, cores,
  threads, GPU, versions), recorded beside its fit time.
"""
from .config import load_config_file, resolve_config, save_config
from .inputs import load_data
from .registry import MODEL_NAMES, available_models
from .runner import collect_records, records_to_dataset, run_grid, run_point
from .sweep import run_sweep
from .tables import markdown_table

__all__ = ["MODEL_NAMES", "available_models", "collect_records", "load_config_file", "load_data", "markdown_table",
           "records_to_dataset", "resolve_config", "run_grid", "run_point", "run_sweep", "save_config"]

"""The machine a grid point was fitted on: parsed, recorded per point, and printed under the tables."""
import os
import platform

import numpy as np
import torch

from dsident.experiments import machine, runner
from dsident.experiments.config import resolve_config
from dsident.experiments.sweep import sweep_table
from dsident.experiments.tables import markdown_table

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model\t\t: 1
model name\t: AMD EPYC  7763 64-Core Processor
processor\t: 1
model name\t: AMD EPYC  7763 64-Core Processor
"""
ARM = """processor\t: 0
BogoMIPS\t: 108.00
Hardware\t: BCM2835
Model\t\t: Raspberry Pi 4 Model B Rev 1.4
"""


def test_cpu_model_reads_the_model_name_not_the_model_number():
    assert machine.cpu_model(X86) == "AMD EPYC 7763 64-Core Processor"      # spaces collapsed, "model: 1" ignored
    assert machine.cpu_model(ARM) == "Raspberry Pi 4 Model B Rev 1.4"       # the board's Model before Hardware
    assert machine.cpu_model("processor : 0\n") == (platform.processor() or platform.machine() or "unknown")


def test_machine_info_describes_this_process():
    info = machine.machine_info()
    assert info["logical_cores"] == os.cpu_count()
    assert 1 <= info["usable_cores"] <= os.cpu_count()
    assert info["torch_threads"] == torch.get_num_threads() and info["torch"] == torch.__version__
    assert (info["gpu"] is None) == (not torch.cuda.is_available())
    label = machine.machine_label(info)
    assert label.startswith(info["cpu"]) and f"{info['torch_threads']} torch thread" in label


def test_describe_machines_counts_points_per_machine():
    a = {"machine": {"cpu": "A", "usable_cores": 2, "logical_cores": 2, "torch_threads": 1, "torch": "t"}}
    b = {"machine": {"cpu": "B", "usable_cores": 8, "logical_cores": 16, "torch_threads": 1, "torch": "t",
                     "gpu": "H100"}}
    labels = [machine.record_machine(r) for r in (a, b, b, {})]
    line = machine.describe_machines(labels)
    assert line.startswith("fitted on: B (8 cores usable of 16, 1 torch thread), GPU H100, torch t (2 points)")
    assert "A (2 cores usable of 2, 1 torch thread), torch t (1 point)" in line and "not recorded (1 point)" in line
    assert machine.describe_machines([]) is None


def test_grid_points_record_their_machine_and_tables_print_it(tmp_path):
    tiny = {"train_length": 300, "eval_length": 200, "fit_options": {"n_epochs": 1, "seq_len": 20},
            "model_params": {"hidden_dim": 4}}
    cfg = resolve_config("lorenz63", "shplrnn", "bptt", overrides=tiny)
    rec = runner.run_grid([cfg], tmp_path, progress=False)[0]
    assert rec["machine"]["logical_cores"] == os.cpu_count() and rec["machine"]["cpu"] == machine.cpu_model()
    again = runner.collect_records(tmp_path)[0]                     # read back from result.json
    assert again["machine"] == rec["machine"]
    results = runner.records_to_dataset([rec])
    assert list(results["machine"].values) == [machine.record_machine(rec)]
    expected = machine.describe_machines([machine.record_machine(rec)])
    assert f"- {expected}" in markdown_table(results)
    assert f"- {expected}" in sweep_table(runner.records_to_dataset([rec], sweep_keys=["seq_len"]), ["seq_len"])
    # a point recorded before dsident kept the machine
    old = {k: v for k, v in rec.items() if k != "machine"}
    assert "fitted on: not recorded (1 point)" in markdown_table(runner.records_to_dataset([old]))
    assert np.all(runner.records_to_dataset([old, rec])["machine"].values != "")

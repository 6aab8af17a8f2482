"""Synthetic soak result files for the publish tests: launches made up here, turned into rows
by :mod:`dsbench.soak.report` exactly as ``dsbench soak`` turns its own, written beside a JSONL
stream in the format :class:`dsbench.soak.run.Stream` writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from dsbench.soak import report
from dsbench.soak.plan import Fault
from dsbench.soak.run import Launch, Settings, Soak
from tests.conftest import make_doc, write_json

MIB = 2**20
T0 = 1_800_000_000.0
STEPS = 400
KILL = Fault(action="kill", point="step", step=130, rank=0)
HANG = Fault(action="hang", point="step", step=250, rank=1)


def _loss(step: int) -> float:
    return 2.0 - step * 1e-3


class _Lines:
    """Stands in for the soak's stream: JSON lines in a file, as ``Stream.write`` writes them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def write(self, kind: str, **fields) -> None:
        self.lines.append(json.dumps({"kind": kind, **fields}))

    def close(self) -> None:
        self.path.write_text("\n".join(self.lines) + "\n")


def _reference(stream: _Lines, growing: float, rng) -> Launch:
    """One uninterrupted launch: memory flat or growing by ``growing`` MiB per 1,000 steps."""
    ref = Launch(run="reference", index=0, fault=None, resume=False, started=T0, first_step=0)
    ref.losses = {s: _loss(s) for s in range(STEPS)}
    for step in range(9, STEPS, 10):
        for rank in (0, 1):
            mib = 400 + 10 * rank + growing * step / 1000 + rng.normal(0, 0.01)
            body = {"rank": rank, "step": step, "time": T0 + step / 10, "rss": int(mib * MIB),
                    "step_s": 0.05 + rng.normal(0, 1e-4), "loss": _loss(step),
                    "loss_scale": None, "skipped_steps": 0}  # fmt: skip
            ref.samples.append(body)
            stream.write("sample", run="reference", launch=0, **body)
    ref.ended = T0 + 60
    return ref


def _faulted(message: str) -> list[Launch]:
    """A kill at step 130, a hang at step 250, each resumed from the latest checkpoint."""
    spans = [(KILL, False, 0, 130), (HANG, True, 120, 250), (None, True, 240, STEPS)]
    out = []
    for i, (fault, resume, first, stop) in enumerate(spans):
        start = T0 + 100 + 50 * i
        launch = Launch(run="faulted", index=i, fault=fault, resume=resume, started=start,
                        first_step=first, ended=start + 20)  # fmt: skip
        launch.losses = {s: _loss(s) for s in range(first, stop)}
        if fault is not None:
            launch.fired = [{"time": start + 19.5 if fault is KILL else start + 8}]
            who = "killed by SIGKILL" if fault is KILL else "stopped responding"
            launch.failure = f"rank {fault.rank} of 2 {who} at step {stop}{message}"
        out.append(launch)
    return out


def write_soak(folder: Path, name: str, *, engine: str = "deepspeed", ds: str = "0.18.4",
               stage: int = 2, growing: float = 0.0, faults: bool = True, hostile: str = "",
               seed: int = 0) -> Path:  # fmt: skip
    """A soak result file ``folder/name.json`` and its stream ``name.soak.jsonl``; ``hostile``
    goes into every string the file carries (label, parameters, messages, the stream's name)."""
    config = {
        "train_batch_size": 16,
        "zero_optimization": {"stage": stage},
        "bf16": {"enabled": True},
    }
    settings = Settings(model="mlp" + hostile, config=config, engine=engine, nproc=2, device="cpu",
                        steps=STEPS, duration_s=None, sample_every=10, checkpoint_every=40,
                        faults=(KILL, HANG) if faults else (), hang_timeout_s=10.0)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    stream = _Lines(folder / f"{name}.soak.jsonl")
    soak = Soak(settings, stream, folder)  # type: ignore[arg-type]  # only .write is used
    soak.launches.append(_reference(stream, growing, np.random.default_rng(seed)))
    if faults:
        soak.launches += _faulted(hostile)
    stream.close()
    params = {"engine": engine, "model": settings.model, "nproc": 2, "stage": stage,
              "precision": "bf16" + hostile}  # fmt: skip
    warmup = report.default_warmup(soak)
    rows = report.drift_rows(soak, params, warmup)
    anomalies = report.loss_anomalies(soak)
    rows.append(report.anomaly_row(anomalies, params))
    section = {
        "status": "complete" + hostile,
        "stopped": None,
        "warmup_steps": warmup,
        "stream": f"../{hostile}{name}.soak.jsonl" if hostile else stream.path.name,
        "thresholds": {"memory_mib_per_1k_steps": 1.0, "step_time_pct_per_1k_steps": 1.0},
        "settings": {"steps": STEPS, "duration_s": None, "sample_every": 10,
                     "checkpoint_every": 40, "hang_timeout_s": 10.0,
                     "faults": [f.to_dict() for f in settings.faults], "ds_config": config},
        "anomalies": anomalies,
        "launches": [{"run": x.run, "launch": x.index, "first_step": x.first_step,
                      "last_step": x.last_step, "seconds": x.ended - x.started,
                      "failure": x.failure} for x in soak.launches],
        "problems": [hostile] if hostile else [],
    }  # fmt: skip
    if faults:
        section["faults"] = report.fault_outcomes(soak)
        rows += report.fault_rows(section["faults"], params)
    env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": ds},
           "cpu": {"model": "Test CPU" + hostile, "logical_cpus": 2}}  # fmt: skip
    doc = make_doc(f"20261201T0000{seed:02d}Z-soak{seed:02d}", f"2026-12-01T00:00:{seed:02d}+00:00",
                   [r.to_json() for r in rows], label=f"soak-{name}{hostile}", env=env)  # fmt: skip
    doc.update(suite="soak", purpose="soak", soak=section, wall_s=200.0)
    doc["argv"] = ["soak", "--model", "mlp" + hostile]
    return write_json(folder / f"{name}.json", doc)


def soak_results(res: Path, claims: Path) -> Path:
    """A results folder with two soaks and the claims in ``claims``: DeepSpeed 0.18.4 ZeRO-3
    with faults and memory growing 50 MiB per 1,000 steps (its stream beside it), and dsbench's
    engine ZeRO-2, flat, without faults, whose stream is missing."""
    write_soak(res / "box", "zero3-ds", stage=3, growing=50.0, seed=1)
    write_soak(res / "box", "zero2-dsbench", engine="dsbench", faults=False, seed=2)
    (res / "box" / "zero2-dsbench.soak.jsonl").unlink()
    shutil.copytree(claims, res / "claims")
    return res

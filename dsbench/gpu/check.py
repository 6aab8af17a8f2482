"""``dsbench gpu-check``: one offline command that turns a short GPU lease into every GPU number.

    make gpu-check [OUT=DIR]          # python -m dsbench gpu-check --out DIR, from the checkout

It runs, in order, each step as its own process under its own timeout (cut to what is left of
``--budget``), going on after a failure and logging it: the environment (``dsbench env``); the
box's ceilings (device-to-device copy bandwidth; a bf16 and fp16 GEMM shape sweep in the way of
ml-engineering's mamf-finder, so % of peak is shown against the datasheet and against what this
box reaches); the CUDA/HIP extension's build; ``dsbench verify-gpu``; the ``gpu``-marked tests;
``dsbench run --suite quick``; a short training suite (both engines, world size = the GPUs
present, 1 included); the inference suite; an A/A pair of the AdamW and GEMM cases (the box's
run-to-run noise). Then it prints a short table: per step ran+passed, ran+failed (why) or not
reached (why), and the headline ratios, with values that cannot be true flagged.

Everything lands in ``--out`` (at most :data:`MAX_FILES` files, two folders deep):
``gpu-check.json`` (steps, ceilings, headline), ``gpu-check.log`` (every step's output) and the
result files of verify-gpu, the three suites and the A/A pair under ``<machine>/``.

It needs only torch, triton, numpy, scipy, pandas, tabulate, matplotlib, rich, pytest and
hypothesis, and runs from the checkout without installing it. DeepSpeed is optional: a wheel in
``.wheels/`` (``make wheels`` on a machine with a network) is installed apart, under
``.dsbench/envs/``, and put on the steps' import path; without one the DeepSpeed rows are
skipped, saying why. ``--device cpu`` rehearses the same steps on a CPU with tiny sizes and one
training rank (``make gpu-check-rehearsal``; CI runs it in an environment built offline).

This process imports no torch: a device fault ends a step, never the check.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: dsbench/gpu/check.py
MAX_FILES = 8
MAX_FILE_BYTES = 16 * 2**20
WHEELS = ROOT / ".wheels"
DEEPSPEED_TARGET = ROOT / ".dsbench" / "envs" / "gpu-check-deepspeed"
TRAINING_FILTER = {
    "gpu": r"^train_step\[.*kernels=best.*model=gpt-small.*stage=[13]\]"
    r"|^train_step_offload\[.*offload=optimizer,.*stage=3\]",
    "cpu": r"^train_step\[comm=native.*kernels=best.*model=mlp.*stage=3\]"
    r"|^train_step_offload\[.*offload=optimizer,.*stage=3\]",
}
AA_FILTER = {
    "gpu": r"^adamw\[impl=torch,params=67108864\]|^gemm\[dtype=float16,impl=torch,size=4096\]",
    "cpu": r"^adamw\[impl=torch,params=100000\]|^gemm\[dtype=\w+,impl=torch,size=128\]",
}
"""The A/A pair's cases: the largest AdamW and a 4096 GEMM of the quick suite (smoke on CPUs)."""


@dataclass(frozen=True)
class Plan:
    """What the steps need to know: where, how, and the environment of their processes."""

    device: str
    """``cuda`` (CUDA or ROCm) or ``cpu`` (the rehearsal)."""
    out: Path
    python: str
    env: dict[str, str]

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    def dsbench(self, *args: str) -> list[str]:
        return [self.python, "-m", "dsbench", *args]


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    timeout_s: tuple[float, float]
    """(on a GPU, on the CPU rehearsal)."""
    argv: Callable[[Plan], list[str] | str]
    """The command, or why the step does not apply here (a string)."""


@dataclass
class Outcome:
    name: str
    title: str
    status: str
    """``passed``, ``failed`` or ``not reached``."""
    why: str = ""
    seconds: float = 0.0
    command: str = ""
    files: list[str] = field(default_factory=list)
    stdout: str = field(default="", repr=False)


def _run_args(suite: str, label: str, *extra: str) -> Callable[[Plan], list[str]]:
    def argv(plan: Plan) -> list[str]:
        cpu = [] if plan.gpu else ["--quick"]
        return plan.dsbench("run", "--suite", suite, "--label", label, "--out", str(plan.out),
                            "--device", plan.device, "--no-compare", "--no-progress", *extra,
                            *cpu)  # fmt: skip

    return argv


def _quick(plan: Plan) -> list[str]:
    return plan.dsbench("run", "--suite", "quick" if plan.gpu else "smoke", "--label",
                        "gpu-check-quick", "--out", str(plan.out), "--device", plan.device,
                        "--no-compare", "--no-progress")  # fmt: skip


def _training(plan: Plan) -> list[str]:
    key = "gpu" if plan.gpu else "cpu"
    extra = ["--filter", TRAINING_FILTER[key]] + ([] if plan.gpu else ["--ranks", "1"])
    return _run_args("training", "gpu-check-training", *extra)(plan)


def _build(plan: Plan) -> list[str] | str:
    if not plan.gpu:
        return "no GPU: the kernels are compile-checked by `dsbench kernels --compile-check`"
    code = "from dsbench.kernels.cuda.build import load; print(load(verbose=True).__file__)"
    return [plan.python, "-c", code]


def gpu_test_files(root: Path = ROOT) -> list[str]:
    """The test files that hold ``gpu``-marked tests."""
    return sorted(
        str(p.relative_to(root))
        for p in (root / "tests").glob("test_*.py")
        if "pytest.mark.gpu" in p.read_text(encoding="utf-8")
    )


def _gpu_tests(plan: Plan) -> list[str]:
    return [plan.python, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider",
            *gpu_test_files()]  # fmt: skip


def _aa(plan: Plan) -> list[str]:
    key = "gpu" if plan.gpu else "cpu"
    return plan.dsbench("ab", "--baseline", "current", "--contender", "current", "--suite",
                        "quick" if plan.gpu else "smoke", "--filter", AA_FILTER[key],
                        "--rounds", "2", "--out", str(plan.out), "--format", "csv")  # fmt: skip


STEPS = (
    Step("env", "dsbench env", (30, 30), lambda p: p.dsbench("env", "--device", p.device)),
    Step("ceilings", "copy bandwidth and GEMM shape sweep", (45, 40),
         lambda p: [p.python, "-m", "dsbench.gpu.ceilings", "--device", p.device]),
    Step("build", "CUDA/HIP extension build", (150, 0), _build),
    Step("verify", "dsbench verify-gpu", (90, 90),
         lambda p: p.dsbench("verify-gpu", "--device", p.device, "--out", str(p.out),
                             *([] if p.gpu else ["--quick"]))),
    Step("gpu-tests", "gpu-marked tests", (90, 60), _gpu_tests),
    Step("quick", "dsbench run --suite quick", (60, 60), _quick),
    Step("training", "training suite (both engines)", (120, 120), _training),
    Step("inference", "inference suite", (45, 60), _run_args("inference", "gpu-check-inference")),
    Step("aa", "A/A pair: AdamW and GEMM noise", (60, 90), _aa),
)  # fmt: skip
"""In order; the GPU timeouts sum past the budget on purpose: a step that ends early leaves its
time to the next, and the budget (not the sum) bounds the check."""


def run_step(step: Step, plan: Plan, deadline: float, log) -> Outcome:
    """Run one step's command under min(its timeout, what is left of the budget); its output
    goes to ``log`` and, for the headline, into the outcome."""
    out = Outcome(step.name, step.title, "not reached")
    argv = step.argv(plan)
    if isinstance(argv, str):
        out.why = argv
        return out
    timeout = min(step.timeout_s[0 if plan.gpu else 1], deadline - time.monotonic())
    out.command = shlex.join(argv)
    if timeout < 5:
        out.why = "the time budget was spent"
        return out
    before = set(_files(plan.out))
    log.write(f"\n===== {step.name}: {out.command} (timeout {timeout:.0f} s)\n")
    log.flush()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=plan.env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
        out.stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out.stdout = _text(exc.stdout)
        stderr, code = _text(exc.stderr), None
    out.seconds = time.monotonic() - t0
    log.write(out.stdout + stderr)
    log.flush()
    out.files = sorted(set(_files(plan.out)) - before)
    if code is None:
        out.status, out.why = "failed", f"timed out after {timeout:.0f} s"
    elif code == 0:
        out.status = "passed"
    else:
        out.status, out.why = "failed", f"exit {code}: {_last_line(stderr or out.stdout)}"
    _judge_tests(step, out)
    return out


def _judge_tests(step: Step, out: Outcome) -> None:
    """pytest's exit 5 (nothing collected) and a run where every test skipped ran nothing."""
    if step.name != "gpu-tests":
        return
    summary = _last_line(out.stdout)
    if out.status == "failed" and out.why.startswith("exit 5"):
        out.status, out.why = "not reached", "no gpu-marked tests were collected"
    elif out.status == "passed" and "passed" not in summary:
        out.status, out.why = "not reached", f"every gpu-marked test skipped ({summary})"
    elif summary:
        out.why = out.why or summary


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:240] if lines else ""


def _files(out: Path) -> list[str]:
    return [str(p.relative_to(out)) for p in sorted(out.rglob("*")) if p.is_file()]


# ------------------------------------------------------------------------------ DeepSpeed


def deepspeed_wheel(wheels: Path = WHEELS) -> Path | None:
    found = sorted(wheels.glob("deepspeed-*.whl"))
    return found[-1] if found else None


def bring_deepspeed(plan_env: dict[str, str], python: str, log) -> str:
    """Where DeepSpeed comes from for the steps: already installed, installed now from the
    newest ``.wheels/deepspeed-*.whl`` (with the other wheels there, no index) under
    :data:`DEEPSPEED_TARGET` and put on the steps' import path, or not at all (said why)."""
    probe = [python, "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"]
    found = subprocess.run(probe, cwd=ROOT, env=plan_env, capture_output=True, text=True)
    if found.returncode == 0:
        return f"DeepSpeed {found.stdout.strip()} installed"
    wheel = deepspeed_wheel()
    if wheel is None:
        return (
            "DeepSpeed not installed and no .wheels/deepspeed-*.whl: its rows are skipped "
            "(bring one with `make wheels` where there is a network)"
        )
    argv = [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
            "--target", str(DEEPSPEED_TARGET), "--upgrade",
            *map(str, sorted(WHEELS.glob("*.whl")))]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, env=plan_env, capture_output=True, text=True)
    log.write(f"\n===== deepspeed: {shlex.join(argv)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        return f"installing {wheel.name} failed: {_last_line(proc.stderr)}"
    plan_env["PYTHONPATH"] = os.pathsep.join([plan_env["PYTHONPATH"], str(DEEPSPEED_TARGET)])
    where = DEEPSPEED_TARGET.relative_to(ROOT)
    return f"DeepSpeed installed from {wheel.relative_to(ROOT)} into {where}"


# ------------------------------------------------------------------------------ headline


@dataclass
class Headline:
    what: str
    value: float | None
    unit: str
    against: str = ""
    ratio: float | None = None
    flag: str = ""


def _rows(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text()).get("benchmarks", [])
    except (OSError, ValueError):
        return []


def _find(rows: list[dict], name: str, **params) -> dict | None:
    for r in rows:
        mine = r.get("params", {})
        if (
            r.get("name") == name
            and r.get("status") == "ok"
            and all(mine.get(k) == v for k, v in params.items())
        ):
            return r
    return None


def _largest(rows: list[dict], name: str, key: str, **params) -> dict | None:
    found = [r for r in rows if _find([r], name, **params)]
    return max(found, key=lambda r: r["params"][key]) if found else None


def _ratio(a: dict | None, b: dict | None) -> float | None:
    if a is None or b is None or not b.get("value"):
        return None
    return a["value"] / b["value"]


def headline(outcomes: list[Outcome], ceilings: dict, out: Path) -> list[Headline]:
    """The ratios the check is for, each from rows measured in this one run."""
    by = {o.name: o for o in outcomes}
    verify = [r for f in by["verify"].files for r in _rows(out / f)] if "verify" in by else []
    quick = [r for f in by["quick"].files for r in _rows(out / f)] if "quick" in by else []
    training = [r for f in by["training"].files for r in _rows(out / f)] if "training" in by else []
    lines: list[Headline] = []
    copy = ceilings.get("copy_bandwidth_gbps")
    for impl in ("triton", "cuda"):
        adam = _largest(verify or quick, "adamw", "params", impl=impl)
        torch_adam = adam and _find(verify or quick, "adamw", impl="torch",
                                    params=adam["params"]["params"])  # fmt: skip
        if adam is not None:
            n = adam["params"]["params"]
            per_copy = adam["value"] / copy if copy else None
            lines.append(Headline(f"{impl} AdamW {n:,} params", adam["value"], adam["unit"],
                                  "copy bandwidth", per_copy))  # fmt: skip
            lines.append(Headline(f"{impl} AdamW {n:,} params", adam["value"], adam["unit"],
                                  "torch fused AdamW", _ratio(adam, torch_adam)))  # fmt: skip
    gemm_rows = verify + quick
    for impl in ("triton", "cuda"):
        for size in (4096, 8192):
            mine = _find(gemm_rows, "gemm", impl=impl, dtype="float16", size=size)
            ref = _find(gemm_rows, "gemm", impl="torch", dtype="float16", size=size)
            if mine is not None:
                lines.append(Headline(f"{impl} fp16 GEMM {size}", mine["value"], mine["unit"],
                                      "torch.matmul", _ratio(mine, ref)))  # fmt: skip
    for dtype in ("float16", "bfloat16"):
        best = (ceilings.get("shape_sweep") or {}).get(dtype) or {}
        ref = _largest(gemm_rows, "gemm", "size", impl="torch", dtype=dtype)
        if ref is not None and best.get("tflops"):
            lines.append(Headline(f"torch {dtype} GEMM {ref['params']['size']}", ref["value"],
                                  ref["unit"], f"best of the shape sweep ({best['shape']})",
                                  ref["value"] / best["tflops"]))  # fmt: skip
    lines += _noise(by.get("aa"), out)
    for r in training:
        if r.get("status") != "ok" or not str(r.get("name", "")).startswith("train_step"):
            continue  # (a CPU run's ceiling rows, dsbench.suites.ceilings, are not steps)
        p = r["params"]
        what = f"{r['name']} {p['engine']} stage {p['stage']} x{p['ranks']}" + (
            f" offload={p['offload']}" if p.get("offload") else ""
        )
        mfu = (r.get("metrics") or {}).get("tflops", {}).get("pct_of_peak")
        mem = r.get("memory") or {}
        peak = mem.get("device_peak_allocated_bytes") or mem.get("host_peak_rss_bytes")
        lines.append(Headline(what, r["value"], r["unit"], "MFU %", mfu))
        if peak:
            lines.append(Headline(what, peak / 2**30, "GiB peak memory"))
    for h in lines:
        h.flag = _impossible(h, ceilings)
    lines += _over_peak(verify + quick + training)
    return lines


def _noise(aa: Outcome | None, out: Path) -> list[Headline]:
    """Per case of the A/A pair: the launch-to-launch spread, the standard deviation of the log
    launch medians pooled over both sides (in %), and the ratio of the two sides."""
    if aa is None or aa.status != "passed":
        return []
    sides = [{r["id"]: r for r in _rows(out / f)} for f in aa.files if f.endswith(".json")]
    if len(sides) != 2:
        return []
    lines = []
    for case, base in sides[0].items():
        cont = sides[1].get(case)
        launches = [r.get("launch_values") or [] for r in (base, cont) if r]
        if cont is None or min(map(len, launches)) < 2:
            continue
        logs = [[math.log(v) for v in side] for side in launches]
        ss = sum(sum((x - sum(side) / len(side)) ** 2 for x in side) for side in logs)
        spread = math.expm1(math.sqrt(ss / (sum(map(len, logs)) - len(logs)))) * 100
        lines.append(Headline(f"A/A {case}", _ratio(cont, base), "ratio",
                              "launch-to-launch spread %", spread))  # fmt: skip
    return lines


def _impossible(h: Headline, ceilings: dict) -> str:
    from dsbench.suites.ceilings import FAIL_SHARE

    if h.against == "copy bandwidth" and h.ratio is not None and h.ratio > FAIL_SHARE / 100:
        return f"over {FAIL_SHARE / 100:g}x the measured copy bandwidth: a wrong byte count"
    if h.against == "copy bandwidth" and h.ratio is not None and h.ratio > 1.0:
        return (f"above the measured copy bandwidth, under {FAIL_SHARE / 100:g}x: AdamW's 7 "
                "streams can be served faster than copy's 2; not a bug")  # fmt: skip
    if h.against.startswith("best of the shape sweep") and h.ratio is not None and h.ratio > 1.05:
        return "above the sweep's best: the sweep understated the ceiling"
    if h.against == "MFU %" and h.ratio is not None and h.ratio > 100:
        return "above datasheet peak: cannot be true"
    return ""


def _over_peak(rows: list[dict]) -> list[Headline]:
    """Every row of this run whose rate lies above its datasheet peak."""
    out = []
    for r in rows:
        pct = r.get("pct_of_peak")
        if r.get("status") == "ok" and pct is not None and pct > 100:
            measured = (r.get("peak") or {}).get("measured")
            what = "the measured ceiling" if measured else "datasheet peak"
            out.append(Headline(r["id"], r["value"], r["unit"], f"% of {what}", pct,
                                f"above {what}: cannot be true"))  # fmt: skip
    return out


# ------------------------------------------------------------------------------ the check


def check(device: str, out: Path, budget_s: float, python: str = sys.executable) -> int:
    """Run every step, write ``gpu-check.json`` and ``gpu-check.log`` into ``out`` and print
    the table; exit status 1 if a step that applies here failed, else 0."""
    from tabulate import tabulate

    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    deadline = time.monotonic() + budget_s
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1")
    outcomes: list[Outcome] = []
    with (out / "gpu-check.log").open("w", encoding="utf-8") as log:
        deepspeed = bring_deepspeed(env, python, log)
        print(f"dsbench gpu-check on {device}: {deepspeed}; budget {budget_s:.0f} s", flush=True)
        plan = Plan(device=device, out=out, python=python, env=env)
        for step in STEPS:
            print(f"  {step.name}: {step.title} ...", end="", flush=True)
            o = run_step(step, plan, deadline, log)
            outcomes.append(o)
            print(f" {o.status} ({o.seconds:.0f} s){f': {o.why}' if o.why else ''}", flush=True)
    ceilings = _ceilings(outcomes)
    lines = headline(outcomes, ceilings, out)
    summary = {
        "schema": "dsbench-gpu-check",
        "version": 1,
        "device": device,
        "started": started.isoformat(timespec="seconds"),
        "wall_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "budget_s": budget_s,
        "deepspeed": deepspeed,
        "steps": [{k: v for k, v in asdict(o).items() if k != "stdout"} for o in outcomes],
        "ceilings": ceilings,
        "headline": [asdict(h) for h in lines],
    }
    (out / "gpu-check.json").write_text(json.dumps(summary, indent=1))
    problems = file_problems(out)
    print()
    print(tabulate([[o.name, o.status, f"{o.seconds:.0f}", o.why] for o in outcomes],
                   headers=["step", "status", "s", "why"], tablefmt="simple"))  # fmt: skip
    print()
    print(tabulate([[h.what, _num(h.value), h.unit, h.against, _num(h.ratio), h.flag]
                    for h in lines], headers=["headline", "value", "unit", "against", "ratio",
                   "flag"], tablefmt="simple", disable_numparse=True))  # fmt: skip
    print(f"\n{len(_files(out))} files in {out} ({summary['wall_s']:.0f} s of {budget_s:.0f})"
          + "".join(f"\nfile limits: {p}" for p in problems))  # fmt: skip
    failed = [o.name for o in outcomes if o.status == "failed"]
    return 1 if failed or problems else 0


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def _ceilings(outcomes: list[Outcome]) -> dict:
    step = next((o for o in outcomes if o.name == "ceilings"), None)
    if step is None or step.status != "passed":
        return {}
    try:
        return json.loads(step.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def file_problems(out: Path) -> list[str]:
    """Where the output breaks its limits: more than :data:`MAX_FILES` files, a file over
    :data:`MAX_FILE_BYTES`, or one more than two folders deep."""
    files = [p for p in out.rglob("*") if p.is_file()]
    problems = [f"{len(files)} files (at most {MAX_FILES})"] if len(files) > MAX_FILES else []
    problems += [f"{p.relative_to(out)} is {p.stat().st_size / 2**20:.1f} MiB"
                 for p in files if p.stat().st_size > MAX_FILE_BYTES]  # fmt: skip
    problems += [f"{p.relative_to(out)} is more than two folders deep"
                 for p in files if len(p.relative_to(out).parts) > 3]  # fmt: skip
    return problems


def default_out() -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ROOT / ".dsbench" / "gpu-check" / stamp


BUDGET_S = {"cuda": 470.0, "cpu": 280.0}
"""Under 8 minutes on one GPU (start-up and transfers of a 15-minute lease left over); under 5
on the CPU rehearsal."""


def gpu_check(choice: str, out: str | None, budget_s: float | None) -> int:
    """``dsbench gpu-check``: the options checked, then :func:`check` on ``choice``'s device
    (``auto``: the GPU if torch sees one, asked in a process of its own) into ``out`` (None:
    :func:`default_out`), under ``budget_s`` (None: :data:`BUDGET_S`)."""
    from dsbench.errors import UsageError

    if budget_s is not None and budget_s <= 0:
        raise UsageError(f"--budget {budget_s:g}: give a positive number of seconds")
    folder = Path(out) if out else default_out()
    if folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {folder} is not empty; gpu-check writes into an empty folder")
    device = _device(choice)
    return check(device, folder, budget_s or BUDGET_S[device])


def _device(choice: str) -> str:
    if choice != "auto":
        return choice
    probe = "import torch; print(int(torch.cuda.is_available()))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return "cuda" if found.stdout.strip() == "1" else "cpu"

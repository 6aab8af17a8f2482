"""Fuzzed inputs (issue 10): whatever a user hands dsbench's readers, each call returns a valid
object or raises a one-line :class:`~dsbench.errors.UsageError` (exit 2 at the CLI), never a
traceback, and reading leaves the file as it was (bytes and mtime).

Each target gets mutations of real files (keys dropped, added or misspelt, values replaced by
wrong types, NaN/inf, huge or negative numbers, unicode, "auto", near-miss or random strings in
enum fields, sections nested wrongly, text spliced or cut) and garbage (random bytes, JSON, TOML):

* ``ds_config``: :func:`dsbench.zero.config.load_config` from a dict, a file or JSON text, with
  random world and batch sizes; an accepted config must give dsbench's engine its settings
  (:func:`dsbench.engines.zero_settings`: loss scaler, first steps of the schedule);
* ``result file``: :func:`dsbench.results.read_run` (schemas 1-3, migrated on load; its one-line
  :class:`~dsbench.results.ResultFileError` is what :func:`~dsbench.results.load_runs` warns
  with) and ``load_runs`` beside a good file; an accepted run must compare with itself;
* ``compare selector``: ``dsbench compare``'s report (:func:`dsbench.cli.compare.build_report`)
  over fixed runs, with random selectors, factors and formats;
* ``hardware profile``: :func:`dsbench.hardware.load_profile_file`, then detection with it;
* ``claims``: :func:`dsbench.publish.data.claims.load_claim_file`, then :func:`~.claims.check`;
* in process through ``dsbench.cli.main``: ``dsbench compare`` with fuzzed selectors and
  ``dsbench train --config`` with fuzzed configs exit 0 or 2, and 2 with one line on stderr.

Hypothesis profiles: ``dsbench`` (``make test``) runs 300 examples a target (30 for each CLI
check), derandomized so every run sees the same examples; ``fuzz`` (``make fuzz``, i.e.
``HYPOTHESIS_PROFILE=fuzz``) 10,000 (1,000), random. The examples each target ran, accepted and
refused, are printed at the end of the module; ``--hypothesis-show-statistics`` shows them per
test as well.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dsbench import compare, hardware, results
from dsbench.cli.compare import build_report
from dsbench.publish.data import claims
from dsbench.zero.config import DSConfig, load_config
from tests._fuzz_helpers import (
    CLI_FUZZ,
    DEEP,
    FUZZ,
    GARBAGE,
    LONG_INT,
    PROFILE_NAME,
    TALLY,
    _cli,
    _one_line,
    _toml,
    _toml_safe,
    _words,
    _write,
    json_values,
    mutations,
    near,
    outcome,
    spliced,
    values,
)
from tests.conftest import FIXTURE_RESULTS, SHIPPED_CLAIMS, make_doc, make_row, write_json

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _print_tally(request):
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or not TALLY:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line(f"fuzz examples per target (hypothesis profile {PROFILE_NAME}):")
        for target, counts in TALLY.items():
            reporter.write_line(
                f"  {target}: {counts.total()} ({counts['accepted']} accepted, "
                f"{counts['refused']} refused, {counts['traceback']} tracebacks)"
            )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# --------------------------------------------------------------------------------------------
# ds_config
# --------------------------------------------------------------------------------------------

CONFIG_FILES = sorted((ROOT / "tests" / "configs").glob("*.json"))
CONFIGS = [json.loads(f.read_text()) for f in CONFIG_FILES]
CONFIG_WORDS = _words(
    CONFIGS, "Adam", "AdamW", "adamw", "Lamb", "SGD", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
    "OneCycle", "LRRangeTest", "StepLR", "log", "linear", "cosine", "cpu", "nvme", "none", "auto",
    "bfloat16", "optimizer.params",
)  # fmt: skip
AUTO_PATHS = ["optimizer.params.lr", "scheduler.params.total_num_steps", "train_batch_size",
              "zero_optimization.reduce_bucket_size", "bf16.enabled"]  # fmt: skip

config_sources = st.one_of(
    mutations(CONFIGS, CONFIG_WORDS),
    mutations(CONFIGS, CONFIG_WORDS),
    mutations(CONFIGS, CONFIG_WORDS),
    json_values(CONFIG_WORDS),
    spliced([f.read_text() for f in CONFIG_FILES]),
    GARBAGE,
)
RUN = {"steps": 10, "hidden_size": 64}  # as `dsbench train` passes them
load_args = st.sampled_from([{}, RUN, RUN | {"micro_batch": 2}, {"world_size": 2},
                             RUN | {"micro_batch": 2, "for_engine": "deepspeed"}])  # fmt: skip
load_args |= st.fixed_dictionaries(
    {
        "world_size": st.integers(1, 8),
        "micro_batch": st.none() | st.integers(1, 64),
        "grad_accum": st.sampled_from([None, None, 1, 3, 1000]),
        "train_batch": st.sampled_from([None, None, None, 8, 100]),
        "for_engine": st.sampled_from(["dsbench", "deepspeed"]),
        "steps": st.none() | st.integers(1, 10**6),
        "hidden_size": st.none() | st.integers(1, 8192),
        "auto_values": st.none() | st.dictionaries(st.sampled_from(AUTO_PATHS), values(["auto"])),
    }
)


def _config_source(doc: Any, kind: str, workdir: Path) -> tuple[Any, list[Path]]:
    """``doc`` as load_config takes it: the dict itself, JSON text, or a file (bytes as they
    are); and the files to check are left alone."""
    if isinstance(doc, dict) and kind == "dict":
        return doc, []
    text = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    if kind == "text" and text.lstrip().startswith((b"{", b"[")) and b"\x00" not in text:
        return text.decode("utf-8", "replace"), []
    path = _write(workdir / "ds_config.json", text)
    return path, [path]


def _use_config(cfg: DSConfig, for_engine: str) -> DSConfig:
    """What the engines do first with a config: the DeepSpeed dict, and for dsbench's engine its
    settings, loss scaler and the first steps' learning rates and betas."""
    from dsbench.engines import zero_settings

    assert isinstance(cfg, DSConfig)
    cfg.to_deepspeed_dict()
    if for_engine == "dsbench" and cfg.optimizer is not None:
        s = zero_settings(cfg)
        for t in range(3):
            if s.lr_at is not None:
                s.lr_at(t)
            if s.betas_at is not None:
                s.betas_at(t)
    return cfg


@FUZZ
@given(doc=config_sources, kind=st.sampled_from(["dict", "text", "file"]), args=load_args)
@example(doc={"train_batch_size": 2, "optimizer.params": {"lr": "auto"}}, kind="dict", args={})
@example(doc={"train_batch_size": 2, "fp16": {"a\nb": 1}}, kind="dict", args={})
@example(doc={"train_batch_size": 10**400}, kind="dict", args={})
@example(doc={"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 10**400}}},
         kind="dict", args={})  # fmt: skip
@example(doc={"train_batch_size": 2, "fp16": {"enabled": True, "initial_scale_power": 10**5},
              "optimizer": {"type": "Adam"}}, kind="dict", args={})  # fmt: skip
@example(doc={"train_batch_size": 2, "optimizer": {"type": "Adam"}, "scheduler": {
              "type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1,
              "cycle_first_step_size": 10**400}}}, kind="dict", args={})  # fmt: skip
@example(doc={"train_batch_size": 2, "tensor_parallel": {"autotp_size": "2"}}, kind="dict", args={})
@example(doc=DEEP, kind="file", args={})
@example(doc=b'{"train_batch_size": ' + LONG_INT + b"}", kind="file", args={})
@example(doc=b"\xff\xfe{}", kind="file", args={})
def test_ds_config(workdir, doc, kind, args):
    """load_config gives a DSConfig the engine can use, or a one-line ConfigError."""
    source, files = _config_source(doc, kind, workdir)
    args = {"world_size": 1, "for_engine": "dsbench", **args}

    def call():
        cfg = load_config(source, warn=_one_line, **args)
        return _use_config(cfg, args["for_engine"])

    outcome("ds_config", call, files)


@CLI_FUZZ
@given(doc=config_sources, nproc=st.integers(1, 3))
@example(doc=DEEP, nproc=1)
@example(doc=b'{"train_batch_size": ' + LONG_INT + b"}", nproc=1)
@example(doc=b"\xff\xfe{}", nproc=1)
@example(doc={"train_batch_size": 2, "optimizer.params": {"lr": "auto"}}, nproc=1)
def test_train_config_cli(workdir, monkeypatch, doc, nproc):
    """``dsbench train --config FILE``: a config that loads starts its ranks (here a stub that
    returns at once), any other exits 2 with one line."""
    monkeypatch.setattr("dsbench.procs.distributed.spawn_ranks", lambda *args, **kwargs: None)
    path, files = _config_source(doc, "file", workdir)
    argv = ["train", "--config", str(path), "--model", "mlp", "--nproc", str(nproc), "--steps", "2"]
    _cli("dsbench train --config", argv, files)


# --------------------------------------------------------------------------------------------
# Result files and their migration
# --------------------------------------------------------------------------------------------


def _result_docs() -> list[dict]:
    """Result documents of schema 3 (two launches, failed and skipped rows, an interrupted
    run, a real file's environment), and the same as schema 2 and 1."""
    rows = [
        make_row("adamw[params=1000]", [[1.0, 1.1, 0.9], [1.2, 1.0]]),
        make_row("gemm[size=64]", [3.0, 2.0, 2.5], unit="ms", direction="lower"),
        make_row("allreduce[size=8]", [], status="failed"),
        make_row("decode[batch=1]", [], status="skipped"),
    ]
    v3 = [
        make_doc("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", rows, label="x"),
        make_doc("20260101T000001Z-bbbbbb", "2026-01-01T00:00:01+00:00", rows[1:2] + rows[3:])
        | {"interrupted": {"signal": "SIGTERM", "finished": 1}, "launches": [{}]},
    ]
    (path,) = FIXTURE_RESULTS.glob("*/*single-a.json")  # a real run (copied from a reference run)
    real = json.loads(path.read_text())
    v3.append(real | {"benchmarks": real["benchmarks"][:2]})
    older = []
    for doc in v3:
        v2 = copy.deepcopy(doc) | {"schema_version": 2}
        v2.pop("launches", None)
        for row in v2["benchmarks"]:
            row.pop("rounds", None)
        older += [v2, {k: v for k, v in v2.items() if k != "source"} | {"schema_version": 1}]
    return v3 + older


RESULT_DOCS = _result_docs()
RESULT_WORDS = _words(
    RESULT_DOCS, results.SCHEMA, *results.STATUSES, *results.DIRECTIONS, *results.SOURCES
)
HEADER = st.fixed_dictionaries(
    {"schema": st.just(results.SCHEMA), "schema_version": values(["3"])}
)  # a random document behind a valid header reaches migration and validation

result_sources = st.one_of(
    mutations(RESULT_DOCS, RESULT_WORDS),
    mutations(RESULT_DOCS, RESULT_WORDS),
    st.builds(lambda h, d: h | d if isinstance(d, dict) else h, HEADER, json_values(RESULT_WORDS)),
    json_values(RESULT_WORDS),
    spliced([json.dumps(d, indent=1) for d in RESULT_DOCS[:2]]),
    GARBAGE,
)


def _use_run(run: results.Run) -> results.Run:
    """What compare and publish read from a run: its fields and rounds, and a comparison of its
    rows with themselves, rendered in every format."""
    assert isinstance(run, results.Run) and run.record.schema_version == results.SCHEMA_VERSION
    assert run.describe() and isinstance(run.fields, dict)
    for row in run.rows.values():
        if row.ok:
            assert results.row_rounds(row) and results.row_rounds(row, "round")
    rows = compare.compare_rows(run.rows, run.rows)
    for fmt in compare.FORMATS:
        compare.rows_table(rows, fmt)
    return run


@FUZZ
@given(doc=result_sources)
@example(doc={"schema": results.SCHEMA, "schema_version": 2, "benchmarks": 5})
@example(doc=b'{"schema": "dsbench-result", "schema_version": 3, "x": ' + LONG_INT + b"}")
@example(doc=RESULT_DOCS[0] | {"benchmarks": [RESULT_DOCS[0]["benchmarks"][0] | {"unit": 7}]})
@example(doc=RESULT_DOCS[0] | {"benchmarks": [RESULT_DOCS[0]["benchmarks"][0] | {"value": 0}]})
@example(doc=RESULT_DOCS[0] | {"benchmarks": [RESULT_DOCS[0]["benchmarks"][0] | {"value": 1e400}]})
@example(
    doc=RESULT_DOCS[0] | {"benchmarks": [RESULT_DOCS[0]["benchmarks"][0] | {"value": 10**400}]}
)
def test_result_file(workdir, doc):
    """read_run gives a current-schema Run compare can use, or one line naming the file;
    load_runs skips that file with one warning and still loads the good one beside it."""
    folder = workdir / "results"
    good = folder / "good.json"
    if not good.exists():
        write_json(good, RESULT_DOCS[0])
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = _write(folder / "fuzzed.json", data)
    outcome("result file", lambda: _use_run(results.read_run(path)), [path])

    warnings: list[str] = []
    runs = results.load_runs(folder, warn=warnings.append)
    assert good in [r.path for r in runs] and len(warnings) <= 1
    for line in warnings:
        _one_line(line)


# --------------------------------------------------------------------------------------------
# Compare selectors
# --------------------------------------------------------------------------------------------


def _compare_docs() -> list[dict]:
    """Runs to select from: two DeepSpeed versions on two Pythons, each with rows of both
    engines; a noise calibration; a run of another machine."""

    def rows(scale: float) -> list[dict]:
        out = [make_row("adamw[params=1000]", [[scale, scale * 1.01], [scale * 0.99, scale]])]
        for engine in ("dsbench", "deepspeed"):
            for kernels in ("torch", "best"):
                row = make_row(f"train_step[engine={engine},kernels={kernels}]", [scale] * 3)
                row["params"] = {"engine": engine, "kernels": kernels}
                out.append(row)
        return out

    docs = []
    for i, (label, ds, py) in enumerate(
        [("before", "0.18.3", "3.11.7"), ("after", "0.18.4", "3.11.7"), ("py", "0.18.4", "3.12.1")]
    ):
        env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}, "python": {"version": py}}
        docs.append(make_doc(f"2026010{i}T000000Z-{i:06d}", f"2026-01-0{i + 1}T00:00:00+00:00",
                             rows(1.0 + i / 10), label=label, env=env))  # fmt: skip
    docs.append(make_doc("20260105T000000Z-nnnnnn", "2026-01-05T00:00:00+00:00", rows(1.0))
                | {"purpose": "noise"})  # fmt: skip
    docs.append(make_doc("20260106T000000Z-oooooo", "2026-01-06T00:00:00+00:00", rows(2.0),
                         label="other", machine="otherbox"))  # fmt: skip
    return docs


PLAUSIBLE = ["0.18.3", "0.18.4", "before", "after", "py", "other", "python=3.11", "python=3.12",
             "deepspeed=0.18.3", "deepspeed=0.18.4", "engine=deepspeed", "engine=dsbench",
             "kernels=torch", "kernels=best", "backend=cpu", "label=before", "suite=quick",
             "machine=otherbox", "profile=cpu", "torch=2.13", "run=20260101",
             "commit=abcdef"]  # fmt: skip
SELECTOR_WORDS = [*PLAUSIBLE, "latest", "3.11", "device=H100", "=", "python=", "=3.11", "a=b=c",
                  "results/testbox/x.json", "/dev/null", "-x", "--help", "none", " ",
                  ""]  # fmt: skip
selectors = st.one_of(
    st.sampled_from(PLAUSIBLE),
    st.sampled_from(PLAUSIBLE),
    st.sampled_from(SELECTOR_WORDS),
    near(SELECTOR_WORDS),
    st.builds("{}={}".format, st.sampled_from([*compare.SELECTOR_KEYS, "engine", "kernels"]),
              st.sampled_from(SELECTOR_WORDS) | st.text(max_size=8)),
    st.text(max_size=12),
)  # fmt: skip
factors = st.sampled_from([1.05, 1.0, 0.99, 2.0, 1e308, math.inf, math.nan]) | st.floats(1, 10)


@pytest.fixture(scope="module")
def compare_runs(workdir) -> tuple[Path, list[results.Run]]:
    folder = workdir / "compare"
    for doc in _compare_docs():
        results.write_run(doc, root=folder)
    return folder, results.load_runs(folder)


@FUZZ
@given(
    baseline=selectors,
    contender=st.none() | selectors,
    factor=factors,
    fmt=st.sampled_from(list(compare.FORMATS)),
)
def test_compare_selectors(compare_runs, baseline, contender, factor, fmt):
    """Any selectors, factor and format: the report, or one line saying what matched nothing."""
    _, runs = compare_runs

    def call():
        rep = build_report(runs, baseline, contender, factor=factor)
        assert compare.render(rep, fmt) and rep.verdict
        return rep

    outcome("compare selector", call)


@CLI_FUZZ
@given(baseline=selectors, contender=st.none() | selectors, factor=factors)
@example(baseline="--help", contender=None, factor=1.05)
@example(baseline="0.18.3", contender="-x", factor=1.05)
def test_compare_cli(compare_runs, baseline, contender, factor):
    """``dsbench compare --baseline SEL [--contender SEL] --factor X``: exit 0, or 2 and a line."""
    folder, _ = compare_runs
    argv = ["compare", "--results", str(folder), "--baseline", baseline, "--factor", str(factor)]
    argv += ["--contender", contender] if contender is not None else []
    _cli("dsbench compare", argv, sorted(folder.rglob("*.json")))


# --------------------------------------------------------------------------------------------
# Hardware profiles and claims (TOML)
# --------------------------------------------------------------------------------------------

PROFILE_FILES = sorted((ROOT / "hardware_profiles").glob("*.toml"))
PROFILE_DOCS = [tomllib.loads(f.read_text()) for f in PROFILE_FILES]
PROFILE_WORDS = _words(
    PROFILE_DOCS, *hardware.VENDORS, *hardware.BACKENDS, *hardware.PEAK_KEYS, "sm_90", "(", "[a-"
)
CLAIM_FILES = sorted(SHIPPED_CLAIMS.glob("*.toml"))  # definitions, not results
CLAIM_DOCS = [tomllib.loads(f.read_text()) for f in CLAIM_FILES]
CLAIM_WORDS = _words(
    CLAIM_DOCS, *claims.FORMS, *claims.DIRECTIONS, *claims.QUALIFIERS, *claims.FIELDS,
    "memory.peak", "train_step", "adamw", "samples_per_s", "bandwidth", "h100-sxm", "mi300x",
    "0.18.3", "python=3.12", "engine=deepspeed", "kernels=", "bogus=1", "dsbench-claims",
)  # fmt: skip


def toml_sources(docs: list[dict], files: list[Path], words: list[str]) -> st.SearchStrategy:
    return st.one_of(
        mutations(docs, words, toml=True).map(_toml),
        mutations(docs, words, toml=True).map(_toml),
        json_values(words).filter(lambda d: isinstance(d, dict) and _toml_safe(d)).map(_toml),
        spliced([f.read_text() for f in files]),
        GARBAGE,
    )


def test_toml_writer_gives_back_the_real_files():
    """The mutations above are written with _toml: it must round-trip the real documents."""
    for doc in PROFILE_DOCS + CLAIM_DOCS:
        assert tomllib.loads(_toml(doc)) == doc


def _use_profile(profile: hardware.Profile) -> hardware.Profile:
    """A loaded profile: JSON for result files and back, every figure, detection with it."""
    assert isinstance(profile, hardware.Profile)
    data = profile.to_dict()
    json.dumps(data, allow_nan=False)
    assert hardware.Profile.from_dict(data) == profile
    for kind in ("mem_bandwidth", "link_bandwidth", *(f"flops:{d}" for d in hardware.DTYPE_PEAKS)):
        profile.peak(kind)
    backend = profile.backend if profile.backend != "any" else "cuda"
    info = {"backend": backend, "name": profile.title, "total_memory_bytes": 80 * 2**30,
            "arch": profile.arch, "compute_units": 132}  # fmt: skip
    assert hardware.detect(info, profiles=hardware.load_profiles() | {profile.name: profile})
    return profile


def toml_examples(key: str, doc: dict) -> Callable:
    """The TOML that broke both readers: ``key`` nested past the recursion limit or with 5000
    digits, and ``doc`` with a line break in a key."""
    texts = [f"{key} = ".encode() + DEEP, f"{key} = ".encode() + LONG_INT]

    def add(test: Callable) -> Callable:
        for text in (*texts, _toml({**doc, "bad\nkey": 1})):
            test = example(text=text)(test)
        return test

    return add


@FUZZ
@given(text=toml_sources(PROFILE_DOCS, PROFILE_FILES, PROFILE_WORDS))
@toml_examples("name", PROFILE_DOCS[0])
@example(text=_toml({**PROFILE_DOCS[0], "tdp_w": {"value": 10**400, "source": "x"}}))
def test_hardware_profile(workdir, text):
    """load_profile_file gives a usable Profile or one line naming the file and the field."""
    stem = _name_in(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
    folder = workdir / "profiles"
    folder.mkdir(exist_ok=True)
    path = _write(folder / f"{stem}.toml", text)
    outcome("hardware profile", lambda: _use_profile(hardware.load_profile_file(path)), [path])
    path.unlink()


def _name_in(text: str) -> str:
    """The profile's name, for its file name (the two must agree), when it can be one."""
    try:
        name = tomllib.loads(text).get("name")
    except (ValueError, RecursionError):
        return "h100-sxm"
    ok = isinstance(name, str) and name.strip(".") and "/" not in name and "\x00" not in name
    return name if ok and len(name.encode()) < 200 else "h100-sxm"


def _modelled_claim(index: int = 0, /, **params: Any) -> str:
    """The shipped claim file whose first claim is modelled (GEMM; the second: all-reduce), with
    ``params`` in the modelled case of claim ``index``."""
    doc = copy.deepcopy(next(d for d in CLAIM_DOCS if "modelled" in d["claims"][0]["dsbench"]))
    doc["claims"][index]["dsbench"]["modelled"]["params"].update(params)
    return _toml(doc)


def _use_claims(loaded: list[claims.Claim]) -> list[claims.Claim]:
    """Loaded claims as publish uses them: each checked (with no runs), its texts and range."""
    assert loaded and all(isinstance(c, claims.Claim) for c in loaded)
    for claim in loaded:
        assert claims.claimed_text(claim) and claims.commands(claim) is not None
        claims.accepted_range(claim)
    assert len(claims.check(loaded, [])) == len(loaded)
    return loaded


@FUZZ
@given(text=toml_sources(CLAIM_DOCS, CLAIM_FILES, CLAIM_WORDS))
@toml_examples("schema_version", CLAIM_DOCS[0])
@example(text=_toml(CLAIM_DOCS[0] | {"claims": [CLAIM_DOCS[0]["claims"][0] | {"id": "a\n"}]}))
@example(text=_toml(CLAIM_DOCS[0] | {"claims": [CLAIM_DOCS[0]["claims"][0]
                                                | {"claimed_ratio": 10**400}]}))  # fmt: skip
@example(text=_modelled_claim(size=""))
@example(text=_modelled_claim(size=10**400))
@example(text=_modelled_claim(size=-1))
@example(text=_modelled_claim(1, size=1, ranks=0))
def test_claims(workdir, text):
    """load_claim_file gives claims that check (no runs: modelled or 'not decided'), or one
    line naming the file, the claim and the field."""
    path = _write(workdir / "claims.toml", text)
    outcome("claims", lambda: _use_claims(claims.load_claim_file(path)), [path])

"""The ``dsbench`` command: one module per verb, each with ``add_arguments`` and ``run``.

User errors (:class:`dsbench.errors.UsageError`, bad arguments) become one line on stderr and
exit status 2. SIGINT and SIGTERM unwind as :class:`dsbench.procs.interrupts.Interrupted` and exit
130 or 143 (a verb may catch it first and keep what it finished, as ``dsbench run`` does).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from dsbench.errors import UsageError
from dsbench.procs import host
from dsbench.procs.interrupts import as_interrupted, signals_raise

VERBS: dict[str, str] = {
    "run": "run benchmark suites and write a result file",
    "sweep": "measure a series (DeepSpeed releases, commits, Pythons) in interleaved rounds and "
    "find its confirmed steps",
    "compare": "compare two runs: better, worse, unchanged or inconclusive, from rounds",
    "ab": "measure two setups (commits, Pythons, DeepSpeed releases, asv envs) in "
    "alternating rounds and compare them",
    "bisect": "find the first DeepSpeed release or commit at which a case's number moved "
    "(binary search, an A/B at each probe)",
    "noise": "A/A calibration: this machine's run-to-run spread per benchmark, for compare",
    "publish": "build a static, offline HTML site from all results (dsbench's and asv's)",
    "env": "report the environment (versions, devices, compilers, profile, kernels)",
    "profiles": "list hardware profiles or show one",
    "train": "train a model with a ds_config on dsbench's ZeRO engine or DeepSpeed",
    "soak": "train for long: memory and step-time drift, loss anomalies, injected failures "
    "detected and resumed bit for bit",
    "zero-to-fp32": "consolidate a ZeRO checkpoint into one fp32 state_dict",
    "kernels": "kernel implementations here; --compile-check builds the CUDA/HIP kernels for "
    "sm_80, sm_90 and gfx90a",
    "verify-gpu": "on a GPU: build every kernel, check it against its torch reference, time "
    "them all side by side, write a result file",
    "gpu-check": "on a GPU box: every GPU number in one offline command under 8 minutes "
    "(--device cpu rehearses it)",
}


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (no usage dump) and exit 2."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: every verb is listed, but only the verb ``argv`` names (all of
    them when ``argv`` is None) loads its module, so ``dsbench compare`` or ``dsbench publish``
    never imports torch or the benchmark definitions the other verbs need."""
    parser = _Parser(prog="dsbench", description=__doc__.splitlines()[0])
    from dsbench import __version__

    parser.add_argument("--version", action="version", version=f"dsbench {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    named = [a for a in argv if a in VERBS][:1] if argv is not None else list(VERBS)
    for verb, help_text in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if verb in named:
            module = importlib.import_module(f"dsbench.cli.{verb.replace('-', '_')}")
            module.add_arguments(p)
            p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    host.printable_streams()  # LANG=C, a Latin-1 terminal: '±' prints as '+-', not a crash
    moved = host.redirect_caches()  # a HOME that cannot be written: caches in a temp folder
    if moved:
        print(f"dsbench: {moved}", file=sys.stderr)
    try:
        with signals_raise():  # SIGTERM too unwinds (ranks stopped, temporary files removed)
            args = build_parser(argv).parse_args(argv)
            return int(args._module.run(args) or 0)
    except UsageError as exc:
        print(f"dsbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        exc = as_interrupted(exc)
        print(f"dsbench: interrupted ({exc.name})", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())

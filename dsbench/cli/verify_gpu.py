"""``dsbench verify-gpu``: on a GPU machine, build every kernel, check it against its torch
reference, time them all side by side and write a result file (:mod:`dsbench.gpu.verify`)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dsbench.gpu.verify import add_arguments as verify_arguments

    verify_arguments(p)


def run(args: argparse.Namespace) -> int:
    from dsbench.gpu.verify import run as verify

    return verify(args)

"""Two setups measured in alternating rounds (``dsbench ab``), and a machine's noise (``noise``).

A *side* is what runs a round: an interpreter and a dsbench source tree, plus extra import
paths. Each round is one fresh ``dsbench run`` process of one side (same suite, filter, sizes
and seeds for both; or, with ``--soak``, one ``dsbench soak`` with the same arguments), in the
order A B B A A B ..., so that a drift in machine load falls on both sides alike (asv's
``--interleave-rounds``, Google Benchmark's random interleaving); with ``--blocks``, one resident
worker of each side taking turns ([Note: sides in turns] in :mod:`dsbench.ab.blocks`). The
rounds of a side are merged into one result file whose rows keep each launch's samples apart
(schema 3 ``rounds``), and :mod:`dsbench.compare` judges the pair with launches as its unit of
evidence (see the note in :mod:`dsbench.stats`).

Sides (``KIND=VALUE``):

- ``commit=REF``: that commit of this checkout, from a git worktree kept under ``.dsbench/``,
  run by the current interpreter;
- ``python=PATH_OR_VERSION``: this checkout under another interpreter (``3.12``: the
  ``.venv312`` that ``make test`` builds, made on first use);
- ``deepspeed=VERSION``: this checkout and interpreter with that DeepSpeed release instead,
  installed once (``pip install --target``, no dependencies, ``DS_BUILD_OPS=0``) under
  ``.dsbench/envs/``;
- ``asv-env=NAME``: this checkout in one of asv's matrix environments (``.asv/env``);
- ``current``: this checkout as it is, with the current interpreter.

A tree is put first on the import path through a *shim*: a folder whose ``dsbench/`` links to
the tree's ``dsbench/*`` and maps ``dsbench.kernels`` and ``dsbench.hardware_profiles`` to the
tree's top-level ``kernels/`` and ``hardware_profiles/`` (as pyproject's ``package-dir`` does),
so an editable install of another checkout cannot shadow it, in the round's process and in the
ranks it spawns.
"""

from dsbench.ab.blocks import BLOCK_PAIRS, TURN_S, run_block_rounds
from dsbench.ab.merge import HEADER_KEYS, merge_launches, merge_row
from dsbench.ab.rounds import (
    LAUNCH_TIMEOUT_S,
    SOURCE_DIRS,
    STOP_GRACE_S,
    Launch,
    LaunchFailed,
    check_unchanged,
    launch_folder,
    order,
    run_child,
    run_rounds,
    tree_fingerprint,
)
from dsbench.ab.sides import (
    AXES,
    KINDS,
    STATE_DIR,
    SideEnv,
    asv_envs,
    checkout_root,
    commit_repo,
    is_checkout,
    last_line,
    make_shim,
    parse_side,
    side_environ,
    tree_text,
)

__all__ = [
    "AXES",
    "BLOCK_PAIRS",
    "HEADER_KEYS",
    "KINDS",
    "LAUNCH_TIMEOUT_S",
    "SOURCE_DIRS",
    "STATE_DIR",
    "STOP_GRACE_S",
    "TURN_S",
    "Launch",
    "LaunchFailed",
    "SideEnv",
    "asv_envs",
    "check_unchanged",
    "checkout_root",
    "commit_repo",
    "is_checkout",
    "last_line",
    "launch_folder",
    "make_shim",
    "merge_launches",
    "merge_row",
    "order",
    "parse_side",
    "run_block_rounds",
    "run_child",
    "run_rounds",
    "side_environ",
    "tree_fingerprint",
    "tree_text",
]

"""The sides of ``dsbench ab`` and ``dsbench noise``: what runs a round (an interpreter, a dsbench
source tree, extra import paths), parsed from ``KIND=VALUE`` (see :mod:`dsbench.ab`), provisioned
(worktrees, venvs, DeepSpeed releases) and put first on a round's import path by a shim."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsbench.errors import UsageError, choices_message

KINDS = ("commit", "python", "deepspeed", "asv-env", "current")
AXES = {
    "commit": {"commit", "dsbench"},
    "python": {"python"},
    "deepspeed": {"deepspeed"},
    "asv-env": {"python", "deepspeed", "torch", "triton", "numpy"},
    "current": set(),
}
"""The run fields each kind of side is meant to vary (compare lists any other difference)."""
STATE_DIR = ".dsbench"


@dataclass(frozen=True)
class SideEnv:
    """How to start a round of one side."""

    spec: str
    """As given: ``commit=HEAD~1``."""
    kind: str
    python: str
    """The interpreter."""
    tree: Path
    """The dsbench source tree it runs."""
    paths: tuple[str, ...] = ()
    """Extra import paths after the tree's shim (a DeepSpeed release installed apart)."""
    description: str = ""

    @property
    def axes(self) -> set[str]:
        return AXES[self.kind]


def checkout_root() -> Path:
    """The git checkout dsbench runs from (its worktrees, shims and side envs live there)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "kernels").is_dir():
        raise UsageError(f"dsbench ab needs dsbench's source checkout; {root} is an installed copy")
    return root


def is_checkout(path: Path) -> bool:
    """Whether ``path`` is the top of a dsbench source checkout."""
    return (
        (path / "pyproject.toml").is_file()
        and (path / "kernels" / "registry.py").is_file()
        and (path / "dsbench" / "cli").is_dir()
    )


def commit_repo(cwd: Path | None = None) -> tuple[Path, str]:
    """The repository ``commit=`` refs resolve in: the dsbench checkout the current directory
    is in, else the one dsbench runs from, with a note saying so (a ref typed in a second clone
    must not silently name a commit of another). Checked by ``tests/test_ab.py``."""
    top = _git(cwd or Path.cwd(), "rev-parse", "--show-toplevel")
    if top and is_checkout(Path(top)):
        return Path(top), ""
    root = checkout_root()
    return root, (
        f"commit= refs resolve in {root}, the checkout dsbench runs from: the current "
        "directory is not in a dsbench checkout"
    )


def tree_text(tree: Path) -> str:
    """``<repository> at <full sha>`` (and whether it has uncommitted changes) of a side's tree."""
    sha = _git(tree, "rev-parse", "HEAD")
    if sha is None:
        return f"{tree} (not a git checkout)"
    dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
    return f"{tree} at {sha}" + (" with uncommitted changes" if dirty else "")


def _git(root: Path, *args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def parse_side(text: str, root: Path | None = None) -> SideEnv:
    """A side from its ``KIND=VALUE`` text; every problem is a :class:`UsageError` and nothing
    is run or written before both sides are known to be good."""
    kind, sep, value = text.partition("=")
    kind, value = kind.strip(), value.strip()
    if kind not in KINDS:
        raise UsageError(choices_message("side kind", kind, KINDS) + " (e.g. commit=HEAD~1)")
    if kind != "current" and not (sep and value):
        raise UsageError(f"side '{text}' has no value after '='; e.g. {kind}=...")
    if kind == "commit":
        return _commit_side(text, value, root or commit_repo()[0])
    root = root or checkout_root()
    return {
        "python": _python_side,
        "deepspeed": _deepspeed_side,
        "asv-env": _asv_side,
        "current": lambda t, v, r: SideEnv(
            t, "current", sys.executable, r, description="this checkout"
        ),
    }[kind](text, value, root)


def _commit_side(text: str, ref: str, root: Path) -> SideEnv:
    if _git(root, "rev-parse", "--show-toplevel") is None:
        raise UsageError(f"side '{text}': {root} is not a git checkout")
    sha = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not sha:
        raise UsageError(
            f"side '{text}': unknown commit '{ref}' in {root}; give a branch, tag or sha "
            f"(newest: {_git(root, 'log', '-3', '--format=%h', 'HEAD') or '?'})".replace("\n", ", ")
        )
    tree = root / STATE_DIR / "worktrees" / sha[:12]
    if not (tree / "dsbench").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        _git(root, "worktree", "prune")
        proc = subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(tree), sha],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise UsageError(f"side '{text}': git worktree add failed: {last_line(proc.stderr)}")
    if not (tree / "dsbench" / "cli").is_dir():
        raise UsageError(f"side '{text}': commit {sha[:12]} has no dsbench/cli (too old)")
    return SideEnv(
        text, "commit", sys.executable, tree, description=f"commit {sha} ({ref}) of {root}"
    )


def _python_side(text: str, value: str, root: Path) -> SideEnv:
    path = Path(value).expanduser()
    if os.sep in value or path.is_file():
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"side '{text}': {path} is not an executable interpreter")
        python = str(path)
    elif re.fullmatch(r"3\.\d+", value):
        python = _python_for(text, value, root)
    else:
        raise UsageError(
            f"side '{text}': give an interpreter path or a version such as 3.12, not '{value}'"
        )
    side = SideEnv(text, "python", python, root, description=f"{python}")
    version = _probe(side, "import sys, torch; print('%d.%d' % sys.version_info[:2])")
    return SideEnv(text, "python", python, root, description=f"Python {version} ({python})")


def find_python(version: str) -> str | None:
    """``python<version>`` on PATH, or pyenv's newest of that version (as the Makefile finds
    it); None when neither exists."""
    found = shutil.which(f"python{version}")
    if found:
        probe = subprocess.run([found, "-c", "pass"], capture_output=True)  # a pyenv shim of
        if probe.returncode == 0:  # a version not installed exits 127
            return found
    if shutil.which("pyenv"):
        proc = subprocess.run(["pyenv", "latest", version], capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return None


def _python_for(text: str, version: str, root: Path) -> str:
    """The interpreter of a Python version: this one, or the venv ``make`` builds for it."""
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    venv = root / f".venv{version.replace('.', '')}"
    if not (venv / "bin" / "python").exists() and not find_python(version):
        raise UsageError(
            f"side '{text}': no Python {version} on this machine (python{version} is not on "
            f"PATH); get one with `pyenv install {version}` or `apt install python{version} "
            f"python{version}-venv`, or give its path: python=/usr/bin/python{version}"
        )
    if not (venv / "bin" / "python").exists() and version == "3.12":
        print(f"dsbench ab: making {venv.name} (torch from the registry)", file=sys.stderr)
        proc = subprocess.run(["make", "-C", str(root), f"{venv.name}/.dsbench-installed"])
        if proc.returncode != 0:
            raise UsageError(
                f"side '{text}': could not make {venv} (make exited {proc.returncode})"
            )
    if not (venv / "bin" / "python").exists():
        raise UsageError(
            f"side '{text}': no Python {version} environment ({venv} is missing); give an "
            "interpreter path instead, e.g. python=/usr/bin/python3.12"
        )
    return str(venv / "bin" / "python")


def _deepspeed_side(text: str, version: str, root: Path) -> SideEnv:
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise UsageError(f"side '{text}': '{version}' is not a DeepSpeed version (e.g. 0.18.3)")
    target = root / STATE_DIR / "envs" / f"deepspeed-{version}"
    done = target / ".dsbench-installed"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        print(f"dsbench ab: installing deepspeed=={version} into {target}", file=sys.stderr)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                f"deepspeed=={version}",
            ],
            env=dict(os.environ, DS_BUILD_OPS="0"),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise UsageError(
                f"side '{text}': pip cannot install deepspeed=={version}: {last_line(proc.stderr)}"
            )
        done.touch()
    side = SideEnv(text, "deepspeed", sys.executable, root, (str(target),))
    got = _probe(side, "import importlib.metadata as m; print(m.version('deepspeed'))")
    if got != version:
        raise UsageError(f"side '{text}': the side imports DeepSpeed {got}, not {version}")
    return SideEnv(
        text,
        "deepspeed",
        sys.executable,
        root,
        (str(target),),
        description=f"DeepSpeed {version} ({target})",
    )


def asv_envs(root: Path) -> dict[str, Path]:
    """asv's environments under ``.asv/env`` by name (``virtualenv-py3.11-deepspeed0.18.3-...``,
    asv's own naming), from the ``asv-env-info.json`` asv writes into each."""
    out = {}
    for info in sorted((root / ".asv" / "env").glob("*/asv-env-info.json")):
        try:
            data = json.loads(info.read_text())
            reqs = sorted((data.get("requirements") or {}).items())
            name = "-".join(
                [data["tool_name"], f"py{data['python']}", *(k + (v or "") for k, v in reqs)]
            )
        except (OSError, ValueError, KeyError):
            continue
        out[name] = info.parent
    return out


def _asv_side(text: str, name: str, root: Path) -> SideEnv:
    envs = asv_envs(root)
    if not envs:
        raise UsageError(
            f"side '{text}': no asv environments under {root / '.asv/env'}; "
            "build them with `make asv-full`"
        )
    matches = [n for n in envs if n == name] or [n for n in envs if name in n]
    if not matches:
        raise UsageError(choices_message("asv environment", name, envs))
    if len(matches) > 1:
        raise UsageError(
            f"side '{text}': '{name}' matches several asv environments "
            f"({', '.join(matches)}); give more of the name"
        )
    python = envs[matches[0]] / "bin" / "python"
    return SideEnv(text, "asv-env", str(python), root, description=f"asv {matches[0]}")


def last_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1] if lines else "(no output)"


# ---------------------------------------------------------------------------- launching


def make_shim(tree: Path, where: Path) -> Path:
    """A folder to put first on the import path so that ``dsbench`` is ``tree``'s (see the
    module docstring); rebuilt each time, so modules added since are seen."""
    pkg = where / "dsbench"
    shutil.rmtree(where, ignore_errors=True)
    pkg.mkdir(parents=True)
    for entry in (tree / "dsbench").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in ("kernels", "hardware_profiles"):
        (pkg / name).symlink_to(tree / name)
    return where


def side_environ(side: SideEnv, shim: Path) -> dict[str, str]:
    paths = [str(shim), *side.paths]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    # an A/B judges each side against the other, not against a ceiling: its launches divide by
    # the cached calibration rather than time ceiling rows (unless the caller says otherwise)
    ceilings = os.environ.get("DSBENCH_CEILINGS", "cached")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONNOUSERSITE="1",
                DSBENCH_CEILINGS=ceilings)  # fmt: skip


def _probe(side: SideEnv, code: str) -> str:
    """Run ``code`` in the side's interpreter with its import paths; its stdout, or a
    UsageError naming the side."""
    with tempfile.TemporaryDirectory(prefix="dsbench-probe-") as tmp:
        shim = make_shim(side.tree, Path(tmp) / "shim")
        try:
            proc = subprocess.run(
                [side.python, "-c", code],
                cwd=tmp,
                env=side_environ(side, shim),
                capture_output=True,
                text=True,
                timeout=300,
            )
        except OSError as exc:
            raise UsageError(f"side '{side.spec}': cannot start {side.python}: {exc}") from None
    if proc.returncode != 0:
        raise UsageError(f"side '{side.spec}': {side.python} fails: {last_line(proc.stderr)}")
    return proc.stdout.strip()

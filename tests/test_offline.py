"""dsbench from a checkout that is not installed (a GPU box without a network): `python -m
dsbench` in the checkout finds dsbench.kernels and dsbench.hardware_profiles in the top-level
folders, as an install maps them. (The whole offline path, in a venv built without the network
and without DeepSpeed or asv, is `make gpu-check-rehearsal`.)"""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_checkout_runs_without_being_installed(tmp_path):
    # -S: no site-packages processing, so the editable install's finder (.pth) is not there;
    # the packages themselves come from the site-packages folder put on the path by hand
    site = sysconfig.get_paths()["purelib"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), site]))
    code = (
        "import json, dsbench.kernels.registry as r, dsbench.hardware_profiles as h, sys; "
        "print(json.dumps([r.__file__, h.__file__, "
        "any(type(f).__name__ == '__EditableFinder' or 'editable' in type(f).__module__ "
        "for f in sys.meta_path)]))"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    kernels, profiles, editable = json.loads(proc.stdout)
    assert not editable
    assert Path(kernels) == ROOT / "kernels" / "registry.py"
    assert Path(profiles) == ROOT / "hardware_profiles" / "__init__.py"
    argv = [sys.executable, "-S", "-m", "dsbench", "run", "--suite", "smoke", "--list"]
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "adamw[impl=torch,params=100000]" in run.stdout.split()

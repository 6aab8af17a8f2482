"""dsbench: honest benchmarks for ZeRO-style distributed training on CUDA, ROCm and CPU."""

import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
from importlib import metadata as _metadata
from pathlib import Path as _Path


def _source_version() -> str:
    """The version pyproject.toml gives, for a source tree that is not installed (``python -m
    dsbench`` in a checkout, an A/B side's shim): the same code then reports the same version
    in every interpreter, installed there or not."""
    import tomllib

    try:
        pyproject = _Path(__file__).resolve().parents[1] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, ValueError):
        return "0.0.0+unknown"


try:
    __version__ = _metadata.version("dsbench")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = _source_version()


class _CheckoutPackages(_abc.MetaPathFinder):
    """``dsbench.kernels`` and ``dsbench.hardware_profiles`` from a checkout that is not
    installed (``python -m dsbench`` in its root, or ``PYTHONPATH=<checkout>``): the top-level
    ``kernels/`` and ``hardware_profiles/``, as pyproject's ``package-dir`` maps them for an
    install. Consulted after every other finder, so an installed dsbench always wins; checked by
    ``tests/test_offline.py``."""

    def __init__(self, root: _Path):
        self.tops = {f"dsbench.{name}": root / name for name in ("kernels", "hardware_profiles")}

    def find_spec(self, fullname, path=None, target=None):
        top = self.tops.get(fullname)
        if top is None:
            return None
        return _util.spec_from_file_location(
            fullname, top / "__init__.py", submodule_search_locations=[str(top)]
        )


_root = _Path(__file__).resolve().parent.parent
_checkout = (_root / "pyproject.toml").is_file() and (_root / "kernels" / "registry.py").is_file()
if _checkout and not any(isinstance(f, _CheckoutPackages) for f in _sys.meta_path):
    _sys.meta_path.append(_CheckoutPackages(_root))

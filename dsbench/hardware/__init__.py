"""Hardware profiles: one TOML file per device in ``hardware_profiles/``, validated here.

A profile holds a device's datasheet figures, each with the source it came from, so that a
benchmark can turn counted work (FLOPs, bytes) into a % of peak and publish can draw roofline
floors. Conventions, the same in every file:

* every figure is **per device as torch sees it** (one MI250X GCD, not the package);
* FLOP rates are **dense** (sparse 2:4 figures are 2x and never used), in TFLOP/s = 1e12 FLOP/s;
* bandwidths are in GB/s = 1e9 B/s; memory bandwidth counts bytes read + written;
* ``link_bandwidth_gbps`` is the intra-node interconnect **per direction** per device, because
  nccl-tests/rccl-tests bus bandwidth is compared with one direction's line rate;
* a figure that does not exist (no TF32 on CDNA2, TDP given per package) carries ``na`` with the
  reason; a figure that only the running machine can tell (generic CPU and GPU) carries
  ``measured = true`` and is filled in by :func:`calibrate`.

Detection (:func:`detect`) matches torch's device name against each profile's regexes, checked
against memory size, arch and compute-unit count when those are known; an unknown GPU gets the
``generic-gpu`` profile and a message saying so.

The parts: :mod:`~dsbench.hardware.schema` (figures and profiles),
:mod:`~dsbench.hardware.parse` (TOML loading and validation), :mod:`~dsbench.hardware.devices`
(detection), :mod:`~dsbench.hardware.ceilings` (measured ceilings for the generic profiles).
"""

from dsbench.hardware.ceilings import (  # noqa: F401  (re-exported)
    _MEASURED_FROM,
    CACHE_FILE,
    CACHE_VERSION,
    CPU_MATMUL_ALWAYS,
    CPU_MATMUL_SIZES,
    GPU_MATMUL_SIZES,
    STREAM_KERNELS,
    STREAM_SECONDS,
    _best_time,
    _cpu_threads,
    _device_name,
    _matmul_rates,
    _measured_value,
    _read_cache,
    _stream_rates,
    _write_atomic,
    calibrate,
    calibration,
    calibration_key,
    measure_ceilings,
    over_peak_note,
    pct_text,
    resolve_cache_dir,
)
from dsbench.hardware.devices import (  # noqa: F401  (re-exported)
    GENERIC_GPU,
    Detection,
    _check,
    _cpu_name,
    _norm_arch,
    detect,
    detect_local,
    local_device_info,
)
from dsbench.hardware.parse import (  # noqa: F401  (re-exported)
    _default_dir,
    _load_default,
    _load_dir,
    _Parser,
    get_profile,
    load_profile_file,
    load_profiles,
)
from dsbench.hardware.schema import (  # noqa: F401  (re-exported)
    _FIGURE_KEYS,
    _OPTIONAL,
    _REQUIRED,
    BACKENDS,
    DTYPE_PEAKS,
    FIGURES,
    OPTIONAL_FIGURES,
    PEAK_KEYS,
    PEAK_UNIT,
    VENDORS,
    Figure,
    Profile,
    ProfileError,
)

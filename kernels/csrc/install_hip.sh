#!/bin/sh
# Install the HIP toolchain that compile-checks dsbench's kernels for AMD gfx90a (MI250X) on a
# machine without a GPU: Debian/Ubuntu's hipcc (HIP 5.2 on bookworm), the HIP headers and the
# ROCm device libraries. Idempotent: does nothing when hipcc already compiles for gfx90a.
#
#   kernels/csrc/install_hip.sh          # as root, or with passwordless sudo
#
# Exit status 0 when hipcc compiles a kernel for gfx90a afterwards, non-zero with a message
# saying why not otherwise.
set -u

ARCH="${DSBENCH_HIP_CHECK_ARCH:-gfx90a}"
PACKAGES="hipcc libamdhip64-dev rocm-device-libs"

say() { echo "install_hip: $*"; }
fail() { echo "install_hip: error: $*" >&2; exit 1; }

# nvcc may be installed too: hipcc must target AMD, not wrap nvcc.
HIP_PLATFORM=amd
export HIP_PLATFORM

hipcc_works() {
    command -v hipcc >/dev/null 2>&1 || return 1
    tmp=$(mktemp -d) || return 1
    printf '%s\n' '#include <hip/hip_runtime.h>' \
        '__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }' >"$tmp/k.hip"
    hipcc -x hip --offload-arch="$ARCH" -c "$tmp/k.hip" -o "$tmp/k.o" >"$tmp/log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || HIPCC_LOG=$(tail -n 5 "$tmp/log")
    rm -rf "$tmp"
    return $rc
}

if hipcc_works; then
    say "hipcc already compiles for $ARCH ($(command -v hipcc)); nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || fail "hipcc is missing or cannot compile for $ARCH, and apt-get is not available:" \
        "install ROCm's hipcc ($PACKAGES) by hand (https://rocm.docs.amd.com)"

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    fail "installing $PACKAGES needs root: run this script as root (or with passwordless sudo)"
fi

say "installing $PACKAGES with apt-get"
$SUDO apt-get update -q || fail "apt-get update failed"
# shellcheck disable=SC2086  # word splitting of the package list is intended
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $PACKAGES \
    || fail "apt-get install $PACKAGES failed (these packages are in Debian bookworm and" \
        "Ubuntu 22.04+; other distributions need ROCm from https://rocm.docs.amd.com)"

HIPCC_LOG=""
if hipcc_works; then
    say "hipcc compiles for $ARCH ($(command -v hipcc))"
    exit 0
fi
fail "hipcc was installed but cannot compile for $ARCH: ${HIPCC_LOG:-hipcc not on PATH}"

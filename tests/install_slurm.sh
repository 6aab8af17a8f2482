#!/bin/sh
# Install Slurm (Debian's slurm-wlm) and MUNGE, which the cluster tests run a real two-node
# Slurm on localhost with (tests/_slurm_cluster.py). Idempotent: does nothing when sbatch,
# slurmctld, slurmd and munged are already installed.
#
#   tests/install_slurm.sh          # as root, or with passwordless sudo
#
# Exit status 0 when they are installed afterwards, non-zero with a message saying why not.
set -u

PACKAGES="slurm-wlm munge"

say() { echo "install_slurm: $*"; }
fail() { echo "install_slurm: error: $*" >&2; exit 1; }

installed() {
    for tool in sbatch srun scontrol scancel slurmctld slurmd munged; do
        command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" \
            >/dev/null 2>&1 || return 1
    done
}

if installed; then
    say "Slurm and MUNGE already installed ($(command -v sbatch)); nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || fail "Slurm is missing and apt-get is not available: install $PACKAGES by hand" \
        "(https://slurm.schedmd.com/quickstart_admin.html)"

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
    || fail "apt-get install $PACKAGES failed (both are in Debian bookworm and Ubuntu 22.04+)"

installed && { say "installed ($(command -v sbatch))"; exit 0; }
fail "$PACKAGES were installed but sbatch, slurmctld, slurmd or munged is not on PATH"

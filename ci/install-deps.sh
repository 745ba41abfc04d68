#!/usr/bin/env bash
# Installs the Debian 12 packages prophet builds, tests and reports with. Idempotent: packages already
# present are skipped, so a second run costs one dpkg query.
#   usage: sudo ci/install-deps.sh        (as root: plain ci/install-deps.sh)
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libtomlplusplus-dev libsqlite3-dev sqlite3 nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev valgrind
  libopenblas-dev
  zlib1g-dev
  coinor-libcbc-dev coinor-libclp-dev coinor-libcgl-dev coinor-libosi-dev coinor-libcoinutils-dev
  openmpi-bin libopenmpi-dev
  slurm-wlm munge
  python3-pandas python3-seaborn python3-matplotlib python3-scipy python3-pytest
  clang libclang-rt-14-dev clang-format clang-tidy
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

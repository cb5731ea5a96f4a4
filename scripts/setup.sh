#!/usr/bin/env bash
# One-command, idempotent set-up of everything hpcbridge needs on Debian 12:
#   1. system parts from Debian packages (Open MPI, parallel HDF5, hdf5-tools);
#   2. a Python 3.11 virtualenv in .venv (git-ignored);
#   3. mpi4py built against the system MPI and h5py built against the Debian MPI HDF5
#      (slow: the wheels are built once and cached in $HPCBRIDGE_CACHE/wheels, outside the repo);
#   4. hpcbridge itself (editable) with its test and analytics extras;
#   5. Apache Hadoop's HDFS jars from Maven Central for the local test cluster (cached), and
#      libhdfs.so for pyarrow's HadoopFileSystem, compiled from the hdfs-sys crate's vendored
#      Hadoop C sources (fetched by cargo from crates.io; cached in $CACHE/libhdfs);
#   6. a loud check that h5py is the parallel build.
# Every step first checks whether its work is already done, so a second run takes seconds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-$here/.venv}
CACHE=${HPCBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hpcbridge}
WHEELS=$CACHE/wheels
# Pinned so the cached wheels stay valid; bump together with pyproject.toml.
MPI4PY_VERSION=${MPI4PY_VERSION:-4.1.2}
H5PY_VERSION=${H5PY_VERSION:-3.16.0}
HDF5_DIR=${HDF5_DIR:-/usr/lib/x86_64-linux-gnu/hdf5/openmpi}
DEBIAN_PACKAGES=(openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools pkg-config build-essential
                 openjdk-17-jdk-headless maven curl
                 fuse3 libfuse3-3 fio)  # hpcbridge mount (libfuse3, fusermount3) and its fio tests

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[setup] ERROR:\033[0m %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages -------------------------------------------------------------
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "Debian packages present (${DEBIAN_PACKAGES[*]})"
fi
if ! command -v cargo >/dev/null && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] \
   && [ ! -f "$CACHE/libhdfs/libhdfs.so" ]; then
  say "installing cargo (Debian) to fetch the hdfs-sys crate's libhdfs sources"
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends cargo
fi
command -v mpicc >/dev/null || die "mpicc not on PATH after installing libopenmpi-dev"
[ -f "$HDF5_DIR/include/hdf5.h" ] || die "parallel HDF5 headers not found in $HDF5_DIR (libhdf5-openmpi-dev)"

# --- 2. virtualenv --------------------------------------------------------------------
command -v "$PYTHON" >/dev/null || die "$PYTHON not found; set PYTHON=/path/to/python3.11"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)

# --- 3. MPI-aware wheels, built once and cached -----------------------------------------
mkdir -p "$WHEELS"
"${PIP[@]}" "numpy>=1.26" "cython>=3" pkgconfig "setuptools>=69" wheel

build_cached_wheel() {  # name version env...: build a from-source wheel into the cache unless present
  local name=$1 version=$2; shift 2
  if ! ls "$WHEELS/${name}-${version}-"*.whl >/dev/null 2>&1; then
    say "building $name $version from source (cached in $WHEELS; takes a few minutes once)"
    env "$@" "$PY" -m pip wheel -q --no-deps --no-binary="$name" --no-build-isolation \
      -w "$WHEELS" "${name}==${version}"
  fi
}

installed_version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }

if [ "$(installed_version mpi4py)" != "$MPI4PY_VERSION" ]; then
  build_cached_wheel mpi4py "$MPI4PY_VERSION" MPICC="$(command -v mpicc)"
  "${PIP[@]}" --no-index --find-links "$WHEELS" "mpi4py==$MPI4PY_VERSION"
fi
if [ "$(installed_version h5py)" != "$H5PY_VERSION" ] || ! "$PY" -c "import h5py, sys; sys.exit(not h5py.get_config().mpi)" 2>/dev/null; then
  build_cached_wheel h5py "$H5PY_VERSION" CC=mpicc HDF5_MPI=ON HDF5_DIR="$HDF5_DIR"
  "${PIP[@]}" --force-reinstall --no-deps --no-index --find-links "$WHEELS" "h5py==$H5PY_VERSION"
fi

# --- 4. hpcbridge and its Python dependencies -------------------------------------------
stamp="$VENV/.hpcbridge-installed"
want=$(cat pyproject.toml setup.cfg | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "installing hpcbridge (editable) with extras [all,test]"
  "${PIP[@]}" -e ".[all,test]"
  echo "$want" > "$stamp"
else
  say "hpcbridge already installed in $VENV"
fi

# --- 5. Hadoop jars for the HDFS testbed (Maven Central, cached in $CACHE) ---------------
"$PY" -c "from hpcbridge.testbed.hadoop import ensure_hadoop; print('[setup] Hadoop jars in', ensure_hadoop())"
"$PY" -c "from hpcbridge.testbed.hadoop import ensure_libhdfs; print('[setup] libhdfs.so in', ensure_libhdfs())"

# --- 6. the checks that matter ----------------------------------------------------------
"$PY" - <<'PYCHECK' || die "h5py in $VENV is NOT the parallel (MPI) build: delete $WHEELS/h5py-* and re-run"
import h5py, mpi4py, sys
from mpi4py import MPI
cfg = h5py.get_config()
print(f"[setup] h5py {h5py.__version__} (HDF5 {h5py.version.hdf5_version}) mpi={cfg.mpi}; "
      f"mpi4py {mpi4py.__version__} on {MPI.Get_library_version().splitlines()[0]}")
sys.exit(0 if cfg.mpi else 1)
PYCHECK
say "ready: $VENV"

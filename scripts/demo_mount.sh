#!/usr/bin/env bash
# The seeds' story end to end, part of `make demo`: parallel HDF5 (FLASH-IO, h5py's mpio driver,
# MPI_NP ranks) writes its checkpoint through `hpcbridge mount` straight into PLFS containers on the
# HDFS testbed -- no staging copy -- and h5ls / h5dump -H read it back through the mount; the
# library (`hpcbridge plfs info`) shows the same file as a container of one writer per rank.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
PY=${PY:-$here/.venv/bin/python}
NP=${MPI_NP:-4}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader,tcp \
       OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
work=$(mktemp -d /tmp/hpcbridge-demo-mount-XXXXXX)
mkdir -p "$work/mnt"
cleanup() {
  "$PY" -m hpcbridge umount "$work/mnt" >/dev/null 2>&1 || true
  "$PY" -m hpcbridge testbed down --dir "$work/testbed" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$PY" -m hpcbridge testbed up --dir "$work/testbed" --json > "$work/testbed.json"
read -r url webhdfs < <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))
print("hdfs://%s:%d http://127.0.0.1:%d" % (d["namenode_host"], d["rpc_port"], d["http_port"]))' "$work/testbed.json")
"$PY" -c 'import hpcbridge,sys; hpcbridge.connect(sys.argv[1]).mkdir("/flash", parents=True)' "$url"
"$PY" -m hpcbridge mount "plfs+$url/flash" "$work/mnt" -o "webhdfs=$webhdfs"
mpirun -n "$NP" --timeout 900 "$PY" benchmarks/flash_io.py --nxb 8 --blocks 20 --dir "$work/mnt" --keep \
  --output "$work/flash.json"
chk="$work/mnt/flash_io_test_hdf5_chk_0000"
echo "--- ls -l of the mount (each file is a PLFS container in plfs+$url/flash)"
ls -l "$work/mnt"
echo "--- h5ls -r (through the mount)"
h5ls -r "$chk" > "$work/h5ls.txt" && head -20 "$work/h5ls.txt"
echo "--- h5dump -H (through the mount)"
h5dump -H "$chk" > "$work/header.txt" && head -40 "$work/header.txt"
echo "--- hpcbridge plfs info (through the library)"
"$PY" -m hpcbridge plfs info "plfs+$url/flash/flash_io_test_hdf5_chk_0000"

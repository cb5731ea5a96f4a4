#!/usr/bin/env bash
# `make demo`: the main job on the embedded default storage (a local directory), under mpirun;
# then staging into HDFS, and the seeds' jobs as locality-aware Dask jobs on an HDFS testbed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
STORAGE=${1:-file://$here/.demo-data}
NP=${MPI_NP:-4}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader,tcp \
       OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
echo "=== 1. HPC: MPI job ($NP ranks) checkpoints into $STORAGE ==="
mpirun -n "$NP" --timeout 900 "$here/.venv/bin/python" examples/demo.py --storage "$STORAGE"
echo
echo "=== 2. Hadoop: stage the results into a local HDFS and show the block layout ==="
"$here/.venv/bin/python" examples/stage_to_hdfs.py --source "$STORAGE"
echo
echo "=== 3. Locality-aware Dask: HDFS testbed + one Dask worker per DataNode host; teragen, grep, wordcount, terasort ==="
"$here/.venv/bin/python" examples/dask_jobs.py --size "${DEMO_DASK_SIZE:-64M}"
# --- hpcbridge mount section (issue 12): begin -----------------------------------------------------
echo
echo "=== 4. Unmodified parallel HDF5 through hpcbridge mount: FLASH-IO checkpoint into PLFS on the HDFS testbed ==="
bash "$here/scripts/demo_mount.sh"
# --- hpcbridge mount section (issue 12): end -------------------------------------------------------
# --- FLASH analytics (issue 13): FLASH-IO checkpoint -> HDFS testbed -> hpcbridge dask flash ------
echo
echo "=== 5. FLASH analytics: a FLASH-IO checkpoint ($NP ranks, parallel HDF5) staged into an HDFS testbed; hpcbridge dask flash with locality on and off ==="
FLASH_DIR="$here/.demo-data/flash"
mkdir -p "$FLASH_DIR"
mpirun -n "$NP" --timeout 900 "$here/.venv/bin/python" benchmarks/flash_io.py --nxb 8 --blocks 20 --keep \
  --dir "$FLASH_DIR" --output "$FLASH_DIR/flash_io.json" | tail -n 7
"$here/.venv/bin/python" examples/flash_analytics.py --checkpoint "$FLASH_DIR/flash_io_test_hdf5_chk_0000" \
  --plot "$FLASH_DIR/dens_histogram.png"
rm -f "$FLASH_DIR"/flash_io_test_hdf5_*
# --- end FLASH analytics ---------------------------------------------------------------------------
# --- emulated cluster (issue 15): hosts in network namespaces, shaped links ----------------------
echo
echo "=== 6. Locality in seconds: grep on an emulated 3-host cluster (network namespaces, 200 Mbit links) ==="
"$here/.venv/bin/python" examples/emulated_cluster.py --size "${DEMO_NETNS_SIZE:-96M}"
# --- end emulated cluster --------------------------------------------------------------------------

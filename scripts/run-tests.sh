#!/usr/bin/env bash
# The whole test suite: serial tests with pytest, then the MPI tests under mpirun with real ranks.
# Rank 0 reports to the terminal, every rank writes JUnit XML and a log under .test-logs/; a
# failure on any rank fails the run. Ends with one closing line counting both parts.
# Usage: scripts/run-tests.sh [extra pytest args]   (MPI_NP=4 by default)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
PY=${PY:-$here/.venv/bin/python}
NP=${MPI_NP:-4}
LOGS=$here/.test-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"

if [ "$(id -u)" = 0 ]; then
  # Open MPI refuses root unless told; the CI and these machines run as root.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Small machines: several ranks per core, no busy-polling, loopback/shared memory only.
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader,tcp \
       OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo

# Servers the tests start must be stopped by the tests themselves: remember what ran before.
hadoop_pids() { pgrep -f 'org.apache.hadoop.hdfs.server' | sort || true; }
before=$(hadoop_pids)
# ... and so must FUSE mounts (hpcbridge mount) and their daemons.
fuse_mounts() { awk '$3 == "fuse.hpcbridge" {print $2}' /proc/mounts | sort; }
mount_pids() { pgrep -f 'hpcbridge[.]mount[.]daemon' | sort || true; }
mounts_before=$(fuse_mounts)
daemons_before=$(mount_pids)
# ... and so must the emulated hosts of `testbed up --netns` (namespaces, bridge, veths: hpcb*).
netns_names() {
  { ip netns list 2>/dev/null | awk '{print $1}'; ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1; } \
    | grep '^hpcb' | sort || true
}
netns_before=$(netns_names)

echo "=== serial tests (pytest) ==="
"$PY" -m pytest -m "not mpi" --junitxml="$LOGS/serial.xml" "$@"
serial_rc=$?

echo
echo "=== MPI tests (mpirun -n $NP, pytest-mpi) ==="
mpirun -n "$NP" --timeout 1800 bash -c '
  rank=${OMPI_COMM_WORLD_RANK:-0}
  args=(-m pytest --with-mpi -m mpi tests/mpi -p no:cacheprovider --junitxml="'"$LOGS"'/mpi-rank$rank.xml" "$@")
  if [ "$rank" = 0 ]; then
    exec "'"$PY"'" "${args[@]}"
  else
    exec "'"$PY"'" "${args[@]}" > "'"$LOGS"'/mpi-rank$rank.log" 2>&1
  fi' mpi-ranks "$@"
mpi_rc=$?

leftover=$(comm -13 <(echo "$before") <(hadoop_pids) | tr '\n' ' ')
if [ -n "${leftover// /}" ]; then
  echo "the tests left HDFS processes running: $leftover (stopping them)" > "$LOGS/leftover"
  kill $leftover 2>/dev/null || true
fi

left_mounts=$(comm -13 <(echo "$mounts_before") <(fuse_mounts) | tr '\n' ' ')
left_daemons=$(comm -13 <(echo "$daemons_before") <(mount_pids) | tr '\n' ' ')
if [ -n "${left_mounts// /}" ] || [ -n "${left_daemons// /}" ]; then
  echo "the tests left hpcbridge FUSE mounts ($left_mounts) or mount daemons ($left_daemons) behind" \
    "(unmounting and stopping them)" | tee -a "$LOGS/leftover"
  for m in $left_mounts; do fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  # shellcheck disable=SC2086
  kill $left_daemons 2>/dev/null || true
  serial_rc=${serial_rc/#0/1}
fi

left_netns=$(comm -13 <(echo "$netns_before") <(netns_names) | tr '\n' ' ')
if [ -n "${left_netns// /}" ]; then
  echo "the tests left emulated-host namespaces or links behind: $left_netns (removing them)" | tee -a "$LOGS/leftover"
  for n in $left_netns; do ip netns del "$n" 2>/dev/null || ip link del "$n" 2>/dev/null || true; done
  serial_rc=${serial_rc/#0/1}
fi

"$PY" scripts/test_summary.py "$LOGS" "$NP" "$serial_rc" "$mpi_rc"

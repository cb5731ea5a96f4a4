"""Summarise the JUnit XML of the serial run and of every MPI rank into one closing line.

Usage: test_summary.py LOG_DIR NP SERIAL_RC MPI_RC. Exits non-zero if any part failed, if a
rank left no report, or if a runner exited non-zero without a recorded failure (a crash).
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    total["failed"] = total["failures"] + total["errors"]
    total["passed"] = total["tests"] - total["failed"] - total["skipped"]
    return total


#: Test modules of the HDFS backend (each driver-dependent test there runs once per driver).
HDFS_MODULES = ("tests.hdfs.", "tests.conformance.test_hdfs", "tests.dask.")


def hdfs_counts(path: Path) -> dict[str, dict[str, int]]:
    """HDFS tests per driver: the driver is named in the test id ([native], [libhdfs-...])."""
    out: dict[str, dict[str, int]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        if not case.get("classname", "").startswith(HDFS_MODULES):
            continue
        name = case.get("name", "")
        tokens = set(name[name.find("[") + 1:].rstrip("]").replace("/", "-").split("-")) if "[" in name else set()
        driver = "libhdfs" if "libhdfs" in tokens else "native" if "native" in tokens else "either"
        kind = ("failed" if case.find("failure") is not None or case.find("error") is not None
                else "skipped" if case.find("skipped") is not None else "passed")
        row = out.setdefault(driver, {"passed": 0, "failed": 0, "skipped": 0})
        row[kind] += 1
    return out


def main() -> int:
    logs, np_, serial_rc, mpi_rc = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    problems = []
    serial = counts(logs / "serial.xml") if (logs / "serial.xml").exists() else None
    if serial is None:
        problems.append("the serial run left no report")
    ranks = {}
    for r in range(np_):
        report = logs / f"mpi-rank{r}.xml"
        if report.exists():
            ranks[r] = counts(report)
        else:
            problems.append(f"MPI rank {r} left no report (see {logs}/mpi-rank{r}.log)")
    rank_failures = [f"MPI rank {r}: {c['failed']} failed (see {logs}/mpi-rank{r}.log)"
                     for r, c in sorted(ranks.items()) if r and c["failed"]]
    mpi = ranks.get(0, {"passed": 0, "failed": 0, "skipped": 0})
    failed_elsewhere = sum(1 for r, c in ranks.items() if r and c["failed"] and not ranks.get(0, {}).get("failed"))
    if serial_rc not in (0, 1) or (serial_rc == 1 and serial and not serial["failed"]):
        problems.append(f"serial pytest exited with {serial_rc}")
    if mpi_rc and not (mpi["failed"] or failed_elsewhere):
        problems.append(f"mpirun exited with {mpi_rc} without a recorded test failure")

    if (logs / "leftover").exists():
        problems.append((logs / "leftover").read_text().strip())
    print("\n=== summary ===")
    if serial:
        per_driver = hdfs_counts(logs / "serial.xml")
        for driver, label in (("native", "driver=native"), ("libhdfs", "driver=libhdfs"),
                              ("either", "driver-independent")):
            if driver in per_driver:
                c = per_driver[driver]
                print(f"HDFS tests, {label + ':':20s}{c['passed']} passed, {c['failed']} failed, "
                      f"{c['skipped']} skipped")
        print(f"serial tests:          {serial['passed']} passed, {serial['failed']} failed, {serial['skipped']} skipped")
    print(f"MPI tests ({np_} ranks):   {mpi['passed']} passed, {mpi['failed']} failed, {mpi['skipped']} skipped"
          f" (rank 0; ranks with failures: {[r for r, c in ranks.items() if c['failed']] or 'none'})")
    for line in rank_failures:
        print(f"FAILED {line}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    passed = (serial or {}).get("passed", 0) + mpi["passed"]
    failed = (serial or {}).get("failed", 0) + mpi["failed"] + failed_elsewhere + len(problems)
    skipped = (serial or {}).get("skipped", 0) + mpi["skipped"]
    print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

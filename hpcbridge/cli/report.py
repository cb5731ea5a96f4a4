"""`hpcbridge bench report results/*.json`: a table and PNG plots of benchmark results.

Reads the JSON the benchmarks write (flash_io, bt_io, lanl_checkpoint, dfsio, readahead,
posix_overhead, ior, shared_file_ceiling, locality), prints one table row per measurement, and
draws one panel per benchmark, in the spirit of the seeds' figures: bandwidth against ranks for
the kernels (one line per mode and backend), against request size for readahead, and bars per
mode for the others.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

__all__ = ["load_results", "rows_of", "render_table", "render_plot"]


def load_results(paths: list[str]) -> list[dict]:
    """Parse benchmark JSON files; ValueError naming a file that is not a benchmark result."""
    results = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable benchmark result ({exc})") from None
        if not isinstance(data, dict) or "benchmark" not in data:
            raise ValueError(f"{path}: no 'benchmark' field: not written by an hpcbridge benchmark")
        data["_path"] = str(path)
        results.append(data)
    return results


def rows_of(result: dict) -> list[dict]:
    """Table rows (benchmark, configuration, ranks, series, MB/s, verified) of one result."""
    kind = result["benchmark"]
    if kind == "flash_io":
        return [{"benchmark": kind, "config": f"{result['nxb']}^3 blocks, {result['mode']}", "ranks": result["ranks"],
                 "series": f"{result['mode']} / {result.get('backend', 'posix')}",
                 "MBps": result["bandwidth_MiBps"] * 1.048576, "verified": result.get("verified")}]
    if kind == "bt_io":
        return [{"benchmark": kind, "config": f"class {result['class']}, {result['subtype']}, {result['backend']}",
                 "ranks": result["ranks"],
                 "series": f"{result['subtype']} / {result['backend']}", "MBps": result["io_MBps"],
                 "verified": result.get("verified")}]
    if kind == "lanl_checkpoint":
        return [{"benchmark": kind, "config": f"{mode} {phase}, unit {result['unit']} B", "ranks": result["ranks"],
                 "series": f"{mode} {phase}", "MBps": value, "verified": result.get("verification_failures") == 0}
                for mode, phases in result["median_MBps"].items() for phase, value in phases.items()]
    if kind == "dfsio":
        return [{"benchmark": kind, "config": f"{rep}, {key}", "ranks": result["procs"], "series": key,
                 "MBps": value, "verified": None}
                for rep, cell in result["results"].items() for key, value in cell.items()
                if key.endswith(("_write", "_read"))]
    if kind == "readahead":
        return [{"benchmark": kind, "config": f"request {row['request']} B, {key[:-5]}", "ranks": 1,
                 "series": f"readahead {key[:-5]}", "MBps": value, "verified": None, "request": row["request"]}
                for row in result["rows"] for key, value in row.items() if key.endswith("_MBps")]
    if kind == "posix_overhead":
        return [{"benchmark": kind, "config": key, "ranks": 1, "series": key, "MBps": value, "verified": None}
                for key, value in result["median_MBps"].items()]
    if kind == "ior":
        # Mean MiB/s of every mode and phase; "-e" marks fsync inside the timing.
        shape = f"-b {result['block']} -t {result['transfer']} -s {result['segments']}" + (" -e" if result["fsync"] else "")
        return [{"benchmark": kind, "config": f"{key} {shape}", "ranks": result["tasks"], "series": key,
                 "MBps": sum(r["MiBps"] for r in runs) / len(runs) * 1.048576,
                 "verified": (all(r["bad_bytes"] == 0 for r in runs) if result.get("verify") else None)}
                for key, runs in result["results"].items() if runs]
    if kind == "shared_file_ceiling":
        verified = result.get("bad_bytes")
        return [{"benchmark": kind, "config": f"{mode}{' fsync' if result['fsync'] else ''}", "ranks": result["ranks"],
                 "series": mode, "MBps": entry["mean"] * 1.048576,
                 "verified": None if verified is None else verified.get(mode) == 0}
                for mode, entry in result["summary"].items()]
    if kind == "locality" and "by_link_rate" in result:
        # Emulated hosts (--netns): one testbed per link rate, each a result of the usual shape.
        return [{**row, "config": f"links {rate}, {row['config']}", "series": f"{row['series']}, links {rate}"}
                for rate, one in result["by_link_rate"].items() for row in rows_of({**one, "benchmark": kind})]
    if kind == "locality":
        # Job bandwidth (dataset bytes / median job time) with locality on and off; the local
        # fraction is in the configuration, since that, not speed, is what locality changes here.
        return [{"benchmark": kind,
                 "config": f"locality {state}, {result[f'locality_{state}']['local_fraction_median']:.0%} local",
                 "ranks": result["datanodes"], "series": f"locality {state}",
                 "MBps": result["dataset_bytes"] / result[f"locality_{state}"]["seconds_median"] / 1e6,
                 "verified": result[f"locality_{state}"]["all_exactly_once"]}
                for state in ("on", "off") if f"locality_{state}" in result]
    return [{"benchmark": kind, "config": "?", "ranks": result.get("ranks", 1), "series": kind,
             "MBps": float("nan"), "verified": None}]


def render_table(results: list[dict]) -> list[list[str]]:
    """The table as rows of strings (header first)."""
    table = [["benchmark", "configuration", "ranks", "MB/s", "verified"]]
    for result in results:
        for row in rows_of(result):
            verified = {True: "yes", False: "NO", None: "-"}[row["verified"]]
            table.append([row["benchmark"], row["config"], str(row["ranks"]), f"{row['MBps']:.1f}", verified])
    return table


def render_plot(results: list[dict], output: str) -> str:
    """Draw one panel per benchmark kind into ``output`` (PNG); returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_kind: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        by_kind[result["benchmark"]].extend(rows_of(result))
    kinds = sorted(by_kind)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(9, 3.6 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        rows = by_kind[kind]
        series: dict[str, list] = defaultdict(list)
        if kind == "readahead":
            for row in rows:
                series[row["series"]].append((row["request"], row["MBps"]))
            for name, points in series.items():
                xs, ys = zip(*sorted(points))
                ax.plot(xs, ys, marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("request size (bytes)")
        elif kind in ("flash_io", "bt_io") and len({r["ranks"] for r in rows}) > 1:
            for row in rows:
                series[row["series"]].append((row["ranks"], row["MBps"]))
            for name, points in series.items():
                xs, ys = zip(*sorted(points))
                ax.plot(xs, ys, marker="o", label=name)
            ax.set_xlabel("MPI ranks")
        else:
            labels = [f"{r['config']}\n({r['ranks']} ranks)" if kind in ("flash_io", "bt_io") else r["config"]
                      for r in rows]
            ax.bar(range(len(rows)), [r["MBps"] for r in rows], color="tab:blue")
            ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("MB/s")
        ax.set_title(kind)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output

"""Every code block of README.md is run by a test, or says it is not.

Three tests run blocks as written: tests/test_readme_short_tour.py (from "## A short tour" to the
HDFS tour), tests/hdfs/test_readme_tour.py (the HDFS tour's block) and
tests/hdfs/test_readme_dask_tour.py (from "The Dask, mount and array tour" to "## Layout of the
repository"); tests/test_readme_mpi.py runs the blocks marked ``<!-- readme: mpirun -n 4 -->``
(MPI programs) under ``mpirun -n 4``. Any other block must carry the marker
``<!-- readme: illustrative -->`` on the line above it, and the paragraph introducing it must tell
the reader it is not run as written.
"""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- readme: illustrative -->"
MPI_MARKER = "<!-- readme: mpirun -n 4 -->"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def _regions(text: str) -> list[tuple[int, int]]:
    """Character ranges whose blocks the README tests run."""
    short = (text.index("## A short tour"), text.index("The HDFS tour (runs as written"))
    hdfs_start = text.index("The HDFS tour (runs as written")
    hdfs = (hdfs_start, text.index("```\n", text.index("```sh\n", hdfs_start) + 6) + 4)
    dask = (text.index("The Dask, mount and array tour"), text.index("## Layout of the repository"))
    return [short, hdfs, dask]


def classify(text: str) -> list[tuple[str, int, str]]:
    """``(kind, line, "run" | "illustrative" | "unaccounted")`` for every fenced block."""
    regions = _regions(text)
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if any(a <= m.start() < b for a, b in regions) or before == MPI_MARKER:
            status = "run"
        elif before == MARKER:
            status = "illustrative"
        else:
            status = "unaccounted"
        out.append((m.group(1), line, status))
    return out


def test_every_readme_block_is_run_or_marked_illustrative():
    text = README.read_text()
    blocks = classify(text)
    assert len(blocks) >= 12
    unaccounted = [(kind, line) for kind, line, status in blocks if status == "unaccounted"]
    assert not unaccounted, f"README blocks neither run by a test nor marked {MARKER}: {unaccounted}"
    run = [b for b in blocks if b[2] == "run"]
    assert sum(kind == "python" for kind, _, _ in run) >= 6 and len(run) >= 11


def test_illustrative_blocks_say_so_and_run_blocks_carry_no_marker():
    text = README.read_text()
    for m in FENCE.finditer(text):
        head = text[:m.start()].rstrip("\n")
        if not head.endswith(MARKER):
            continue
        paragraph = head[:-len(MARKER)].rstrip("\n").rsplit("\n\n", 1)[-1]
        assert re.search(r"not run", paragraph), paragraph  # visible to the reader, not only the marker
    for a, b in _regions(text):
        assert MARKER not in text[a:b] and MPI_MARKER not in text[a:b]


def test_a_new_unmarked_block_is_caught():
    text = README.read_text().replace("## Layout of the repository",
                                      "## Layout of the repository\n\n```sh\nrm -rf /\n```\n", 1)
    assert ("sh", text.count("\n", 0, text.index("```sh\nrm -rf /")) + 1, "unaccounted") in classify(text)

"""Same output before and after a change: the headless ``compare`` (default way and ``--no-replay``) and
``replay`` on a fixed set of dump pairs, each file they write and every report line, as one normalised
text (issue 31: a refactoring keeps every report line, CSV, suspects CSV and advisor file byte-identical).

    python bench/same_output.py [--tree DIR] [-o DIGEST]      # the digest of DIR's code (default: .)
    python bench/same_output.py --against OTHER_TREE          # both trees on the same dumps, then diff

The pairs: the demo (``ptdbg-tui demo DIR --no-app``), every pair under tests/fixtures (ptdbg,
msprobe, the mixed pairs, the original's legacy pkl against itself) and, made here by
:mod:`ptdbg_tui.formats.synthetic`, the seed pair, a two-rank job and a two-step run. The dumps are made
once (by the first tree) and read by both. Normalised: the temporary folders, the timestamps in file
names, and durations ("1.6 s", "264 ms a call"), which differ between any two runs.

Each tree runs in its own process (``PYTHONPATH=TREE``), the commands in turn through ``cli.main``,
``--jobs 1``, so that the run takes a couple of minutes on a loaded 2-core box.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT / "tests" / "fixtures"

#: The commands run on each pair: (name, argv after NPU BENCH).
#: The replay budgets are wall-clock time: on a loaded box the default's ran out in one tree and not in
#: the other ("not replayed: budget ran out"), so both ways are given time enough (a budget that runs
#: out is its own test's business).
WAYS = (
    ("compare", ("compare", "--jobs", "1", "--no-progress", "--replay-budget", "3600")),
    ("compare --no-replay", ("compare", "--jobs", "1", "--no-progress", "--no-replay")),
    ("replay", ("replay", "--jobs", "1", "--no-progress", "--budget", "3600")),
)


def fixture_pairs() -> list[tuple[str, Path, Path]]:
    """The pairs under tests/fixtures, named by their folder."""
    pairs = []
    for npu in sorted(FIXTURES.rglob("npu")):
        bench = npu.parent / "bench"
        if npu.is_dir() and bench.is_dir():
            pairs.append((str(npu.parent.relative_to(FIXTURES)), npu, bench))
    legacy = FIXTURES / "ptdbg_legacy" / "npu_test.pkl"
    pairs.append(("ptdbg_legacy (itself)", legacy, legacy))
    return pairs


def make_dumps(folder: Path) -> list[tuple[str, Path, Path]]:
    """The demo and the synthetic pairs, written into ``folder`` (run in the tree's own process)."""
    from ptdbg_tui.cli import main
    from ptdbg_tui.formats.synthetic import write_ranks_pair, write_seed_pair

    with open(os.devnull, "w") as quiet, _stdout(quiet):
        if main(["demo", str(folder / "demo"), "--no-app"]) != 0:
            raise SystemExit("the demo could not be written (torch?)")
    seed = write_seed_pair(folder / "seed")
    ranks = write_ranks_pair(folder / "ranks", ranks=2, layers=2, faulty_rank=1, faulty_layer=0)
    steps = folder / "steps"
    for step, s in enumerate((0, 1)):  # two runs of the seed pair, as steps 0 and 1 of one run
        one = write_seed_pair(folder / f"step_{step}", seed=s)
        for side, root in zip(("npu", "bench"), one, strict=True):
            (tree,) = root.iterdir()  # ptdbg_dump_vX
            target = steps / side / tree.name / f"step{step}"
            target.parent.mkdir(parents=True, exist_ok=True)
            (tree / "step0").rename(target)
    return [
        ("demo", folder / "demo" / "npu", folder / "demo" / "cpu"),
        ("seed", *seed),
        ("ranks", *ranks),
        ("steps", steps / "npu", steps / "bench"),
    ]


class _stdout:
    """``sys.stdout`` set to ``stream`` for a while (the report's ``say`` prints to it)."""

    def __init__(self, stream: object) -> None:
        self.stream = stream

    def __enter__(self) -> None:
        self.saved = sys.stdout
        sys.stdout = self.stream  # type: ignore[assignment]

    def __exit__(self, *_: object) -> None:
        sys.stdout = self.saved


def normalise(text: str, folders: dict[str, str]) -> str:
    """Text that two runs of the same code write alike: folders named, timestamps and durations out."""
    for path, name in sorted(folders.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    text = re.sub(r"(?<!\d)\d{14}(?!\d)", "<ts>", text)  # compare_result_20260101120000.csv
    text = re.sub(r"(?<!\d)\d{8}_\d{6}(?!\d)", "<ts>", text)
    text = re.sub(r"\d+(\.\d+)? ?(ms|s|min)\b", "<t>", text)
    return text


def _untimed(csv_text: str) -> str:
    """A replay CSV without its Seconds column (each call's own duration), its rows in order."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(csv_text)))
    if not rows or "Seconds" not in rows[0]:
        return csv_text
    at = rows[0].index("Seconds")
    rows = [[*r[:at], *r[at + 1 :]] for r in rows]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([rows[0], *sorted(rows[1:])])
    return buf.getvalue()


def _calls_sorted(report: str) -> str:
    """The replay command's report with each pair's call lines in name order: the replays end, and
    are listed, in the order the workers finish them."""
    out: list[str] = []
    calls: list[str] = []
    for line in report.splitlines():
        if line.startswith("  "):
            calls.append(line)
            continue
        out += [*sorted(calls), line]
        calls = []
    return "\n".join(out + sorted(calls)) + "\n"


def run_tree(dumps: Path, digest: Path, make: bool) -> None:
    """This process's tree: (``make``: write the dumps first) every way on every pair, into ``digest``."""
    import io

    from ptdbg_tui.cli import main

    pairs = make_dumps(dumps) if make else _made_pairs(dumps)
    pairs += fixture_pairs()
    out_root = Path(tempfile.mkdtemp(prefix="same_output_"))
    parts = []
    for label, npu, bench in pairs:
        for k, (way, argv) in enumerate(WAYS):
            out = out_root / f"{label.replace('/', '_').replace(' ', '_')}-{k}"
            buf = io.StringIO()
            with _stdout(buf):
                code = main([argv[0], str(npu), str(bench), "-o", str(out), *argv[1:]])
            folders = {str(out): "<out>", str(dumps): "<dumps>", str(FIXTURES): "<fixtures>"}
            report = buf.getvalue() if way != "replay" else _calls_sorted(buf.getvalue())
            parts.append(f"=== {label}: {way}: exit {code}\n{normalise(report, folders)}")
            for f in sorted(out.iterdir()) if out.is_dir() else ():
                body = f.read_text(encoding="utf-8", errors="backslashreplace")
                if f.name.startswith("replay_"):
                    body = _untimed(body)
                parts.append(f"--- {normalise(f.name, folders)}\n{normalise(body, folders)}")
    digest.write_text("\n".join(parts), encoding="utf-8")


def _made_pairs(dumps: Path) -> list[tuple[str, Path, Path]]:
    """The pairs :func:`make_dumps` wrote, found again by the second tree."""
    seed, ranks = dumps / "seed", dumps / "ranks"
    steps = dumps / "steps"
    return [
        ("demo", dumps / "demo" / "npu", dumps / "demo" / "cpu"),
        ("seed", seed / "npu", seed / "bench"),
        ("ranks", ranks / "npu", ranks / "bench"),
        ("steps", steps / "npu", steps / "bench"),
    ]


def start_tree(tree: Path, dumps: Path, out: Path, make: bool) -> subprocess.Popen[bytes]:
    """:func:`run_tree` in a process that imports ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from same_output import run_tree; "
        "from pathlib import Path; run_tree(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == '1')"
    )
    argv = [sys.executable, "-c", code, str(HERE), str(dumps), str(out), "1" if make else "0"]
    return subprocess.Popen(argv, env=env, cwd=tempfile.gettempdir())


def finished(run: subprocess.Popen[bytes], out: Path) -> str:
    """The digest's sha256, once its process ends well."""
    if run.wait() != 0:
        raise SystemExit(f"{out}: the run failed (exit {run.returncode})")
    return hashlib.sha256(out.read_bytes()).hexdigest()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", default=str(ROOT), help="the source tree to run (default: this checkout)")
    p.add_argument("--against", default=None, metavar="OTHER_TREE", help="run this tree too, and diff")
    p.add_argument("-o", "--output", default="same_output.txt", help="the digest (OTHER_TREE's: .against)")
    p.add_argument("--dumps", default=None, help="where the made dumps go (default: a temporary folder)")
    args = p.parse_args()
    dumps = Path(args.dumps or tempfile.mkdtemp(prefix="same_output_dumps_"))
    out = Path(args.output).resolve()
    other_out = out.with_name(out.name + ".against")
    if not (dumps / "demo").is_dir():  # made by the tree under test, before the two runs start
        mine = finished(start_tree(Path(args.tree).resolve(), dumps, out, True), out)
        if args.against is None:
            print(f"{args.tree}: {mine}  {out}")
            return 0
        theirs = finished(start_tree(Path(args.against).resolve(), dumps, other_out, False), other_out)
    else:  # both at once: each runs its commands one by one
        runs = [start_tree(Path(args.tree).resolve(), dumps, out, False)]
        if args.against is not None:
            runs.append(start_tree(Path(args.against).resolve(), dumps, other_out, False))
        mine = finished(runs[0], out)
        theirs = finished(runs[1], other_out) if args.against is not None else ""
    print(f"{args.tree}: {mine}  {out}")
    if args.against is None:
        return 0
    print(f"{args.against}: {theirs}  {other_out}")
    if mine == theirs:
        print("identical")
        return 0
    diff = difflib.unified_diff(
        other_out.read_text().splitlines(), out.read_text().splitlines(), args.against, args.tree, lineterm=""
    )
    print("\n".join(list(diff)[:200]))
    return 1


if __name__ == "__main__":
    sys.exit(main())

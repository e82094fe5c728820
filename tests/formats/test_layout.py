"""Finding rank dumps from any level of a dump tree, and pairing the two sides."""

from __future__ import annotations

import inspect
import typing

import pytest

from ptdbg_tui.compare.report.words import statistics_only_text, unpaired_text
from ptdbg_tui.formats import layout
from ptdbg_tui.formats.layout import (
    DumpLayoutError,
    OneSided,
    RankCounts,
    SameDump,
    Side,
    StatisticsOnly,
    discover,
    pair_dumps,
    rank_dir_path,
    same_dump,
    statistics_only,
    steps_and_ranks,
    tensor_bytes,
    unpaired,
)


def _dump(root, rank, step=None, pkl="api_stack_dump.pkl", npy=True, tag_version="4.0"):
    rank_dir = rank_dir_path(root, rank, step, version=tag_version) if isinstance(rank, int) else None
    if rank_dir is None:  # a literal dir name such as rank<pid> of the original
        base = root / f"ptdbg_dump_v{tag_version}"
        rank_dir = (base / f"step{step}" if step is not None else base) / rank
    rank_dir.mkdir(parents=True, exist_ok=True)
    (rank_dir / pkl).write_text("")
    if npy:
        (rank_dir / pkl.removesuffix(".pkl")).mkdir(exist_ok=True)
    return rank_dir


def test_every_level_finds_the_same_dump(tmp_path):
    rank_dir = _dump(tmp_path, 0, step=3)
    expected = rank_dir / "api_stack_dump.pkl"
    for path in (
        tmp_path,
        tmp_path / "ptdbg_dump_v4.0",
        tmp_path / "ptdbg_dump_v4.0" / "step3",
        rank_dir,
        expected,
    ):
        found = discover(path)
        assert [d.records for d in found] == [expected], path
        assert (found[0].step, found[0].rank) == (3, 0)


def test_dump_properties(tmp_path):
    d = discover(_dump(tmp_path, 1, step=0))[0]
    assert d.mode == "api_stack" and d.stack_mode and d.has_tensors
    assert d.tensor_dir == d.rank_dir / "api_stack_dump" and d.label == "step0/rank1"
    plain = discover(_dump(tmp_path / "b", 0, pkl="dump.pkl", npy=False))[0]
    assert plain.mode == "all" and not plain.stack_mode and not plain.has_tensors and plain.label == "rank0"


def test_steps_and_ranks_sorted_numerically(tmp_path):
    for step in (0, 10, 2):
        for rank in (0, 1):
            _dump(tmp_path, rank, step=step)
    found = discover(tmp_path)
    assert [(d.step, d.rank) for d in found] == [(s, r) for s in (0, 2, 10) for r in (0, 1)]
    assert steps_and_ranks(found) == ([0, 2, 10], [0, 1])


def test_cpu_bench_in_rank_pid_pairs_with_rank0(tmp_path):
    npu = discover(_dump(tmp_path / "npu", 0))
    bench = discover(_dump(tmp_path / "cpu", "rank12345"))
    assert bench[0].rank == 12345
    pairs = pair_dumps(npu, bench)
    assert [(n.rank, b.rank) for n, b in pairs] == [(0, 12345)]


def test_several_ranks_pair_by_number_and_filters_apply(tmp_path):
    for r in (0, 1, 2):
        _dump(tmp_path / "npu", r, step=0)
    for r in (2, 0, 1):
        _dump(tmp_path / "gpu", r, step=0)
    _dump(tmp_path / "gpu", 0, step=1)
    npu, bench = discover(tmp_path / "npu"), discover(tmp_path / "gpu")
    assert [(n.rank, b.rank, b.step) for n, b in pair_dumps(npu, bench)] == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]
    assert [(n.rank, b.rank) for n, b in pair_dumps(npu, bench, rank=2)] == [(2, 2)]
    assert pair_dumps(npu, bench, step=1) == []


def test_one_step_each_pairs_despite_different_step_numbers(tmp_path):
    npu = discover(_dump(tmp_path / "npu", 0, step=5))
    bench = discover(_dump(tmp_path / "gpu", 0, step=7))
    assert len(pair_dumps(npu, bench)) == 1
    assert pair_dumps(npu, bench, step=7) == []


def test_summary_only_dump_and_other_pkl_names(tmp_path):
    d = discover(_dump(tmp_path, 0, pkl="range_dump.pkl", npy=False))[0]
    assert d.mode == "range" and d.stack_mode and not d.has_tensors
    odd = _dump(tmp_path / "odd", 0, pkl="custom.pkl")
    assert discover(odd)[0].mode == "custom"


@pytest.mark.parametrize("what", ["missing", "empty_dir", "not_pkl", "unrelated_tree"])
def test_not_a_dump(tmp_path, what):
    path = tmp_path / "x"
    if what == "empty_dir":
        path.mkdir()
    elif what == "not_pkl":
        path.write_text("hello")
    elif what == "unrelated_tree":
        (path / "src" / "rank0").mkdir(parents=True)
        (path / "src" / "rank0" / "dump.pkl").write_text("")
    with pytest.raises(DumpLayoutError) as e:
        discover(path)
    assert str(path) in str(e.value)


def test_tensor_bytes_count_the_files_until_the_limit(tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    for k, folder in enumerate(folders):
        folder.mkdir()
        for i in range(3):
            (folder / f"t{i}.npy").write_bytes(b"x" * (100 * (k + 1)))
    (folders[0] / "sub").mkdir()  # folders are not files
    assert tensor_bytes(folders, 10_000) == 900
    assert 250 <= tensor_bytes(folders, 250) < 900  # stops once the answer is known
    assert tensor_bytes([tmp_path / "missing", folders[1]], 10_000) == 600


@pytest.mark.parametrize(
    ("folders", "records"),
    [
        ("ptdbg_dump_v4.0/step1/rank0", "api_stack_dump.pkl"),
        ("ptdbg_dump_v4.0/rank3", "api_stack_dump.pkl"),
        ("ptdbg_dump_v4.0.T2/step0/rank10642", "api_stack_dump.pkl"),
        ("step0/rank0", "dump.json"),
        ("rank0", "dump.json"),
    ],
)
def test_a_rank_dump_knows_the_folder_its_writer_was_given(tmp_path, folders, records):
    """Where ``ptdbg-dump run`` writes the run's manifest: the ``--dump-path``, above the tag and step
    folders; an msprobe dump has no tag folder, so a user's folder named like one (``exp_v1``) stays."""
    root = tmp_path / "exp_v1"
    (root / folders).mkdir(parents=True)
    (root / folders / records).write_text("")
    (dump,) = discover(root)
    assert dump.dump_path == root


def test_what_the_layout_finds_of_the_pairs_is_values_and_the_words_module_says_it(tmp_path):
    """formats writes no prose (issue 31): a dump on one side only, a bench without the data folder the
    NPU has, one dump file on both sides come back as values, and the report's words are said from them."""
    for rank in (0, 1):
        _dump(tmp_path / "npu", rank)
    _dump(tmp_path / "bench", 0, npy=False)
    npu, bench = discover(tmp_path / "npu"), discover(tmp_path / "bench")
    paired = pair_dumps(npu, bench)
    left_out = unpaired(npu, bench, paired, None, None)
    assert left_out == (
        OneSided(side=Side.NPU, label="rank1"),
        RankCounts(npu=(0, 1), bench=(0,)),
    )
    assert unpaired_text(left_out[0]) == "NPU rank1: no bench dump for it"
    why = statistics_only(npu[0], bench[0])
    assert why == StatisticsOnly(bare=Side.BENCH, missing=bench[0].tensor_dir)
    assert statistics_only_text(why) == (
        f"the bench dump holds no tensors (it has no data folder {bench[0].tensor_dir}) and the other does"
    )
    assert same_dump(npu[0], bench[0]) is None
    assert same_dump(npu[0], npu[0]) == SameDump(path=npu[0].records)
    assert unpaired_text(unpaired(npu, bench, [], 4, None)[0]) == (
        "no NPU and bench rank dumps pair up for step 4 (NPU: steps [none], ranks [0, 1]; bench: steps "
        "[none], ranks [0]): both dumps have no stepN folder (dumped without --step), so --step 4 selects "
        "nothing there"
    )


def test_no_layout_function_returns_words():
    """A note that formats built as a sentence returned ``str``: every public function of the layout
    returns values, for :mod:`ptdbg_tui.compare.report.words` to say."""
    said = []
    for name, fn in vars(layout).items():
        if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != layout.__name__:
            continue
        returned = typing.get_type_hints(fn).get("return")
        if str in (returned, *typing.get_args(returned)):
            said.append(name)
    assert not said, f"formats/layout.py returns words from {said}: return a value, say it in words.py"

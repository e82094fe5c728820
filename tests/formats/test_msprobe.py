"""msprobe dumps: dump.json flattened into msprobe's own rows, stack.json, construct.json, finding
its folders, and following a dump.json that msprobe rewrites whole at each flush."""

from __future__ import annotations

import csv
import fcntl
import json
import shutil
from pathlib import Path

import pytest

from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.formats.layout import DumpLayoutError, discover, pair_dumps
from ptdbg_tui.formats.msprobe import MsprobeFollower, decode_entry, decode_stacks, module_chains, split_dump
from ptdbg_tui.formats.naming import PARAMS_GRAD, STYLE_MSPROBE
from ptdbg_tui.formats.reader import read_dump

FIXTURES = Path(__file__).parents[1] / "fixtures" / "msprobe"
MODES = ("tensor", "statistics", "md5", "xor", "mix")


def _t(data_name: str | None = None, **kw: object) -> dict[str, object]:
    leaf: dict[str, object] = {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [2, 3],
        "Max": 1.0,
        "Min": -1.0,
        "Mean": 0.0,
        "Norm": 2.0,
        "requires_grad": True,
    }
    if data_name:
        leaf["data_name"] = data_name
    leaf.update(kw)
    return leaf


@pytest.mark.parametrize("mode", MODES)
def test_rows_are_msprobes_own_in_its_order(mode):
    """Every row msprobe's own compare wrote for the real dumps, named and ordered as it names them."""
    theirs = [r["NPU Name"] for r in csv.DictReader((FIXTURES / mode / "msprobe_compare.csv").open())]
    batch = read_dump(discover(FIXTURES / mode / "npu")[0])
    assert [r.name for r in batch.tensors] == theirs
    assert not batch.bad and batch.stacks


def test_an_api_entry_flattens_args_kwargs_and_nested_outputs():
    value = {
        "input_args": [_t("Functional.x.0.forward.input.0.pt"), {"type": "int", "value": 1}, None],
        "input_kwargs": {
            "bias": _t("Functional.x.0.forward.kwargs.bias.pt"),
            "mode": {"type": "str", "value": "mean"},
        },
        "output": [[_t(), _t(requires_grad=False)]],
    }
    records, bad = decode_entry("Functional.x.0.forward", value)
    assert bad is None
    names = [r.name for r in records]
    assert names == [
        "Functional.x.0.forward.input.0",
        "Functional.x.0.forward.input.1",
        "Functional.x.0.forward.input.2",
        "Functional.x.0.forward.kwargs.bias",
        "Functional.x.0.forward.input.mode",
        "Functional.x.0.forward.output.0.0",
        "Functional.x.0.forward.output.0.1",
    ], "a row is named by its data file where it has one"
    t, i, none, kw, s, o0, o1 = records
    assert t.entry.key == ("Functional", "x", 0, "forward", "input", (0,)) and t.entry.style == STYLE_MSPROBE
    assert t.data_file == "Functional.x.0.forward.input.0.pt" and t.requires_grad is True
    assert (i.dtype, i.shape_raw, i.stats, i.data_file) == ("<class 'int'>", "[]", [1] * 4, None)
    assert i.is_scalar
    assert i.md5 == "83dcefb7", "msprobe's CRC-32 of str(value), as its md5 compare prints it"
    assert none.is_none and none.is_scalar and none.data_file is None
    assert kw.entry.path == ("bias",) and s.stats == ["mean"] * 4
    assert o0.entry.path == (0, 0) and o0.data_file is None and o1.requires_grad is False
    assert str(o0.entry) == o0.name and o0.entry.call == "Functional.x.0.forward"


def test_module_entries_and_parameter_gradients_share_the_modules_calls():
    fwd, _ = decode_entry(
        "Module.layer1.0.conv.Conv2d.forward.1",
        {
            "input_args": [_t()],
            "input_kwargs": {},
            "output": [_t()],
            "parameters": {"weight": _t(), "bias": _t()},
        },
    )
    assert [r.name.rsplit(".forward.1.", 1)[1] for r in fwd] == [
        "input.0",
        "parameters.weight",
        "parameters.bias",
        "output.0",
    ]
    assert fwd[0].entry.call == "Module.layer1.0.conv.Conv2d.forward.1" and fwd[0].entry.label.endswith(".1")
    grads, _ = decode_entry(
        "Module.layer1.0.conv.Conv2d.parameters_grad.1", {"weight": [_t()], "bias": [_t()]}
    )
    assert [r.name for r in grads] == [
        "Module.layer1.0.conv.Conv2d.parameters_grad.1.weight",
        "Module.layer1.0.conv.Conv2d.parameters_grad.1.bias",
    ]
    g = grads[0].entry
    assert (g.kind, g.path, g.call) == (PARAMS_GRAD, ("weight",), "Module.layer1.0.conv.Conv2d.backward.1")
    assert str(g) == grads[0].name and g.forward_call == "Module.layer1.0.conv.Conv2d.forward.1"


def test_odd_entries_are_reported_not_fatal():
    records, bad = decode_entry("Torch.add.0.forward", ["not", "an", "object"])
    assert records == [] and "expected an object" in unreadable_text(bad.reason)
    records, bad = decode_entry("something_else", {"x": _t()})
    assert [r.name for r in records] == ["something_else.x"] and records[0].entry is None and bad is None
    deep: object = _t()
    for _ in range(500):
        deep = [deep]
    records, bad = decode_entry("Torch.add.0.forward", {"input_args": deep})
    assert "deeper" in unreadable_text(bad.reason)


def test_stacks_new_and_old_forms():
    new = decode_stacks(
        {
            "0": [
                ["Torch.add.0.forward", "Torch.add.1.forward"],
                ["File /m/model.py, line 12, in forward, \n x = a + b", "odd frame"],
            ]
        }
    )
    assert [s.name for s in new] == ["Torch.add.0.forward", "Torch.add.1.forward"]
    assert new[0].frames == [("/m/model.py", "12", "forward", "x = a + b"), ("odd frame", "", "", None)]
    assert new[0].call == "Torch.add.0.forward"
    old = decode_stacks({"Tensor.__add__.0.forward": ["File /a.py, line 3, in f, \n y()"]})
    assert old[0].name == "Tensor.__add__.0.forward" and old[0].frames[0][:3] == ("/a.py", "3", "f")


def test_module_chains_from_parent_links():
    chains = module_chains(
        {
            "Module.layer1.Sequential.forward.0": None,
            "Module.layer1.0.Block.forward.0": "Module.layer1.Sequential.forward.0",
            "Functional.relu.0.forward": "Module.layer1.0.Block.forward.0",
            "Torch.add.0.forward": ["Module.layer1.0.Block.forward.0", 3],  # Megatron: [parent, micro step]
            "Torch._foreach_add_.0.forward": "optimizer",
            "optimizer": "",
        }
    )
    assert chains["Functional.relu.0.forward"] == (("layer1", "Sequential"), ("layer1.0", "Block"))
    assert chains["Torch.add.0.forward"] == chains["Functional.relu.0.forward"]
    assert chains["Module.layer1.0.Block.forward.0"] == (("layer1", "Sequential"), ("layer1.0", "Block")), (
        "a module's own chain ends with itself"
    )
    assert chains["Torch._foreach_add_.0.forward"] == (("optimizer", ""),)


def test_every_level_of_an_msprobe_dump_is_found(tmp_path):
    root = tmp_path / "dump"
    shutil.copytree(FIXTURES / "statistics" / "npu", root)
    (proc,) = (root / "step0").iterdir()
    for path in (root, root / "step0", proc, proc / "dump.json"):
        (found,) = discover(path)
        assert found.records == proc / "dump.json" and found.format == STYLE_MSPROBE
        assert (found.step, found.rank, found.label) == (0, None, f"step0/{proc.name}")
        assert found.tensor_dir == proc / "dump_tensor_data" and not found.has_tensors
    (root / "step0" / "rank3").mkdir()
    (root / "step0" / "rank3" / "dump.json").write_text("{}")
    assert [d.rank for d in discover(root)] == [None, 3]
    with pytest.raises(DumpLayoutError, match="msprobe"):
        discover(tmp_path / "dump" / "step0" / proc.name / "stack.json")


def test_a_single_proc_folder_pairs_with_the_other_sides_single_folder():
    npu = discover(FIXTURES / "tensor" / "npu")
    bench = discover(FIXTURES / "mixed_msprobe" / "bench")  # ptdbg_dump_v4.0/step0/rank0
    assert [(n.label, b.label) for n, b in pair_dumps(npu, bench)] == [(npu[0].label, bench[0].label)]


# --- following a dump.json that is rewritten whole ------------------------------------------------


def _entries(mode: str = "tensor") -> dict[str, object]:
    (proc,) = (FIXTURES / mode / "npu" / "step0").iterdir()
    return json.loads((proc / "dump.json").read_text())


def _write(path: Path, full: dict[str, object], n: int) -> None:
    data = dict(full, data=dict(list(full["data"].items())[:n]))
    path.write_text(json.dumps(data, indent=1))


def test_a_flush_that_appends_yields_only_the_new_records(tmp_path):
    full = _entries()
    path = tmp_path / "dump.json"
    _write(path, full, 3)
    f = MsprobeFollower(path)
    first = f.read()
    assert first.tensors and not first.reset
    assert not f.read(), "an unchanged file yields nothing"
    _write(path, full, 6)
    second = f.read()
    assert not second.reset and second.tensors[0].order == len(first.tensors)
    all_names = [r.name for r in read_dump(discover(FIXTURES / "tensor" / "npu")[0]).tensors]
    assert [r.name for r in first.tensors + second.tensors] == all_names[
        : len(first.tensors + second.tensors)
    ]


def test_a_changed_entry_starts_over(tmp_path):
    full = _entries()
    path = tmp_path / "dump.json"
    _write(path, full, 4)
    f = MsprobeFollower(path)
    n = len(f.read().tensors)
    changed = json.loads(path.read_text())
    first = next(iter(changed["data"]))
    changed["data"][first]["input_args"][0]["Max"] = 123.0
    path.write_text(json.dumps(changed))
    again = f.read()
    assert again.reset and len(again.tensors) == n and again.tensors[0].stats[0] == 123.0


def test_a_half_written_file_is_retried_then_reported_only_when_final(tmp_path):
    full = _entries()
    path = tmp_path / "dump.json"
    text = json.dumps(full, indent=1)
    path.write_text(text[: len(text) // 2])
    f = MsprobeFollower(path)
    assert not f.read(), "a half-written dump.json waits for the rest"
    path.write_text(text)
    assert len(f.read().tensors) == 75
    path.write_text(text[:100])
    final = f.read(final=True)
    assert not final.tensors and "not complete JSON" in unreadable_text(final.bad[0].reason)


def test_a_file_locked_by_its_writer_is_not_read(tmp_path):
    full = _entries()
    path = tmp_path / "dump.json"
    _write(path, full, 2)
    f = MsprobeFollower(path)
    with open(path, "r+b") as writer:
        fcntl.flock(writer.fileno(), fcntl.LOCK_EX)
        assert not f.read()
        fcntl.flock(writer.fileno(), fcntl.LOCK_UN)
    assert f.read().tensors


def test_msprobes_layout_is_split_without_decoding_and_agrees_with_json():
    (proc,) = (FIXTURES / "mix" / "npu" / "step0").iterdir()
    text = (proc / "dump.json").read_text()
    header, entries = split_dump(text)
    data = json.loads(text)
    assert header == {k: v for k, v in data.items() if k != "data"}
    assert [(name, json.loads(value)) for name, value in entries] == list(data["data"].items())
    assert split_dump(json.dumps(data)) == (header, [(n, json.dumps(v)) for n, v in data["data"].items()]), (
        "another layout is decoded whole"
    )
    assert split_dump(json.dumps(dict(data, data={}), indent=1)) == (header, [])


def test_entries_are_decoded_a_chunk_per_call(tmp_path):
    path = tmp_path / "dump.json"
    _write(path, _entries(), 10_000)
    f = MsprobeFollower(path, chunk=2000)
    batches = [f.read()]
    while batches[-1].more:
        batches.append(f.read())
    assert len(batches) > 5 and not any(b.reset for b in batches)
    whole = MsprobeFollower(path, chunk=float("inf")).read()
    assert [r.name for b in batches for r in b.tensors] == [r.name for r in whole.tensors]


def test_one_malformed_entry_is_reported_and_the_others_read(tmp_path):
    path = tmp_path / "dump.json"
    _write(path, _entries(), 10_000)
    text = path.read_text()
    first = text.index('"input_args"')
    path.write_text(text[:first] + '"input_args": [oops' + text[first + len('"input_args": [') :])
    batch = MsprobeFollower(path).read(final=True)
    assert len(batch.bad) == 1 and "not valid JSON" in unreadable_text(batch.bad[0].reason)
    assert unreadable_text(batch.bad[0].reason).startswith("entry Functional.conv2d.0.forward")
    assert len(batch.tensors) == 75 - 11


def test_module_chains_of_a_deep_chain_and_cycles_are_bounded_and_lazy():
    """A 100k-deep parent chain costs per node asked, not nodes × depth at load; cycles end."""
    import time

    from ptdbg_tui.formats.msprobe import MAX_DEPTH, ModuleTree

    links = {f"Module.m{i}.M.forward.0": f"Module.m{i + 1}.M.forward.0" for i in range(100_000)}
    links |= {
        "Module.a.A.forward.0": "Module.b.B.forward.0",
        "Module.b.B.forward.0": "Module.a.A.forward.0",
        "Module.s.S.forward.0": "Module.s.S.forward.0",
        "Functional.relu.0.forward": "Module.m0.M.forward.0",
        "Functional.gelu.0.forward": "Module.a.A.forward.0",
        "Torch.x.0.forward": {"not": "a parent"},
    }
    start = time.monotonic()
    tree = ModuleTree(links)
    relu = tree.get("Functional.relu.0.forward")
    assert time.monotonic() - start < 5
    assert relu is not None and len(relu) == MAX_DEPTH and relu[-1] == ("m0", "M")
    assert tree.get("Functional.gelu.0.forward") == (("b", "B"), ("a", "A"))
    assert tree.get("Module.s.S.forward.0") == (("s", "S"),)
    assert tree.get("Torch.x.0.forward") == () and tree.get("absent") is None
    assert tree == ModuleTree(dict(links)) and tree != ModuleTree({})


def test_a_dump_json_cut_short_for_good_keeps_its_complete_entries(tmp_path):
    """The writer died half way: what it wrote is compared, and the cut is said."""
    text = json.dumps(_entries(), indent=1)

    def read_all(cut: int) -> tuple[list[str], list[str]]:
        path = tmp_path / f"{cut}" / "dump.json"
        path.parent.mkdir()
        path.write_text(text[:cut])
        follower, names, bad = MsprobeFollower(path), [], []
        while True:
            batch = follower.read(final=True)
            names += [t.name for t in batch.tensors]
            bad += [unreadable_text(b.reason) for b in batch.bad]
            if not batch.more:
                return names, bad

    everything, _ = read_all(len(text))
    kept, bad = read_all(len(text) // 2)
    assert 0 < len(kept) < len(everything) and kept == everything[: len(kept)]
    assert len(bad) == 1 and "cut short" in bad[0]

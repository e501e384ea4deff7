"""Transform checks (vmap, compile, autocast, checkpoint, opcheck): each catches its bug, passes its twin."""

from __future__ import annotations

import pytest
import torch

from audit.results.outcome import HELD, SKIPPED, VIOLATED
from audit.runtime.ddp_rank import NAME
from tests.helpers import entry, observe
from tests.versions import STRICT_EXPORT_OF_FUNCTIONS, reachable, requires_torch

T = "tests.fixtures.transforms"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 5]}}
ROWS = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
BATCH = {"kind": "callable", "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [0, 6], "N": [1, 4]}}
LINEAR = {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 4], "K": [1, 4], "N": [1, 4]},
          "reference": f"{T}:linear_reference"}
OP = {"kind": "op", "load": [T], "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
MATRIX = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 6], "N": [1, 3]}}


def claims(spec: dict, **supports) -> dict:
    return {**spec, "supports": {**spec.get("supports", {}), **supports}}


# (broken target, check, registry keys, words the message must contain, correct twin)
CASES = [
    (f"{T}:OldStyleCube", "vmap", claims(VECTOR, vmap=True), "setup_context", f"{T}:Cube"),
    (f"{T}:NoVmapRule", "vmap", claims(VECTOR, vmap=True), "generate_vmap_rule = True", f"{T}:CubeVmapRule"),
    (f"{T}:WrongVmapRule", "vmap", claims(VECTOR, vmap=True), "in_dims (1,)", f"{T}:CubeVmapRule"),
    (f"{T}:BranchOnData", "compile", claims(VECTOR, compile="fullgraph"), "Data-dependent branching", f"{T}:Cube"),
    (f"{T}:ItemInForward", "compile", claims(VECTOR, compile="fullgraph"), "Python number", f"{T}:Cube"),
    (f"{T}:WrongWhenCompiled", "compile", claims(VECTOR, compile=True), "compiled output 0", f"{T}:Cube"),
    (f"{T}:rows_doubled", "compile", claims(BATCH, compile=True), "recompiled for every new shape", f"{T}:doubled"),
    (f"{T}:LinearNoAmp", "autocast", claims(LINEAR, autocast=True), "custom_bwd", f"{T}:LinearAmp"),
    (f"{T}:PrivateDropout", "checkpoint", VECTOR, "forward is not pure", f"{T}:GlobalDropout"),
    ("audit_transforms::wrong_fake", "opcheck", OP, "test_faketensor failed", "audit_transforms::scale"),
    ("audit_transforms::no_autograd", "opcheck", OP, "no autograd formula", "audit_transforms::scale"),
    (f"{T}:CachedByIdentity", "export", claims(VECTOR, export=True), "strict (Dynamo) trace baked in", f"{T}:Cube"),
    ("audit_transforms::no_fake", "export", claims(OP, export=True), "trace (non-strict export)",
     "audit_transforms::scale"),
    (f"{T}:CenteredRows", "distributed", claims(MATRIX, distributed=True), "per-process state", f"{T}:Cube"),
]


def _name(target: str) -> str:
    return target.split(":")[-1]


@pytest.mark.parametrize("broken, check, spec, words, twin",
                         [pytest.param(*c, marks=reachable(c[0], c[1]), id=_name(c[0])) for c in CASES])
def test_check_catches_its_bug(tmp_path, broken, check, spec, words, twin):
    found = observe(entry(tmp_path, target=broken, **spec), check)
    assert found.verdict == VIOLATED, found
    assert words in found.message
    assert found.case is not None and found.script


@pytest.mark.parametrize("broken, check, spec, words, twin", CASES, ids=[f"{_name(c[4])}-{c[1]}" for c in CASES])
def test_check_passes_the_correct_twin(tmp_path, broken, check, spec, words, twin):
    found = observe(entry(tmp_path, target=twin, **spec), check)
    assert found.verdict == HELD, found.message
    assert found.examples > 1


def test_wrong_vmap_rule_shrinks_to_a_batch_dim_that_is_not_first(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:WrongVmapRule", **claims(VECTOR, vmap=True)), "vmap")
    assert found.case["in_dims"] == [1] and found.case["dims"] == {"N": 1}
    assert "in_dims = [1]" in found.script


def test_vmap_covers_unbatched_inputs_and_jacfwd(tmp_path):
    """Two inputs, either unbatched; jacfwd runs because forward_ad is claimed, and needs a jvp."""
    spec = claims(ROWS, vmap=True, forward_ad=True)
    found = observe(entry(tmp_path, target=f"{T}:RowScaleBatched", **spec), "vmap")
    assert found.verdict == VIOLATED and "jacfwd needs forward-mode AD" in found.message
    assert observe(entry(tmp_path, target=f"{T}:RowScaleBatched", **claims(ROWS, vmap=True)), "vmap").verdict == HELD


def test_vmap_on_a_custom_op_reports_pytorchs_bug_not_the_entry(tmp_path):
    found = observe(entry(tmp_path, target="audit_transforms::scale", **claims(OP, vmap=True)), "vmap")
    assert found.verdict == SKIPPED
    assert "PyTorch bug, not the entry's" in found.message and "pytorch/pytorch#168393" in found.message


def test_compile_records_backend_graphs_and_compile_time(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:doubled", **claims(BATCH, compile=True)), "compile")
    assert found.details["backend"] == "aot_eager"
    assert found.details["graphs"] <= 2 and found.details["shapes"] == 4
    assert found.details["compile_seconds"] > 0


def test_compile_names_where_the_graph_breaks(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:BranchOnData", **claims(VECTOR, compile="fullgraph")), "compile")
    assert "transforms.py" in found.message and "if x.sum() > 0" in found.message


@pytest.mark.parametrize("target", ["BranchOnData", "ItemInForward"])
def test_a_graph_break_with_eager_results_holds_compile_true_and_is_recorded(tmp_path, target):
    """compile: true claims correctness under torch.compile; a graph break is a performance fact."""
    found = observe(entry(tmp_path, target=f"{T}:{target}", **claims(VECTOR, compile=True)), "compile")
    assert found.verdict == HELD, found.message
    assert found.details["graph_breaks"] >= 1 and found.details["graph_break"]


def test_one_graph_records_no_graph_break(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:Cube", **claims(VECTOR, compile="fullgraph")), "compile")
    assert found.verdict == HELD and found.details["graph_breaks"] == 0


def test_autocast_output_dtype_follows_the_reference(tmp_path):
    """The reference's matmul runs in bfloat16 under autocast; a Function forced to float32 is flagged."""
    spec = claims({**LINEAR, "reference": f"{T}:linear_reference"}, autocast=True)
    found = observe(entry(tmp_path, target=f"{T}:LinearFloat32", **spec), "autocast", "float32")
    assert found.verdict == VIOLATED and "the reference gives bfloat16" in found.message


def test_opcheck_reports_each_utility(tmp_path):
    found = observe(entry(tmp_path, target="audit_transforms::wrong_fake", **OP), "opcheck")
    assert found.details["utils"]["test_faketensor"] == "fail"
    assert found.details["utils"]["test_schema"] == "pass"


@pytest.mark.slow
def test_unclaimed_transform_failures_are_recorded_not_gated(write_registry, tmp_path):
    """A new user's view: the matrix records what breaks under each transform; only claims gate."""
    import json

    from click.testing import CliRunner

    from audit.cli import cli

    old = {"name": "old", "owner": "@team", "target": f"{T}:OldStyleCube", **VECTOR}
    branchy = {"name": "branchy", "owner": "@team", "target": f"{T}:BranchOnData", **VECTOR}
    defaults = {"supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
    out = tmp_path / "out"
    args = ["run", "--out", str(out), "--check", "vmap", "--check", "compile", "--progress", "off"]
    quiet = CliRunner().invoke(cli, [*args, "--registry", str(write_registry([old, branchy], defaults=defaults))])
    assert quiet.exit_code == 0, quiet.output
    cells = {(e["name"], c["check"]): c for e in json.loads((out / "matrix.json").read_text())["entries"]
             for c in e["cells"]}
    assert cells["old", "vmap"]["status"] == "unsupported" and "setup_context" in cells["old", "vmap"]["message"]
    assert cells["branchy", "compile"]["status"] == "xpass"  # compile: true would hold; fullgraph would not
    assert cells["branchy", "compile"]["metrics"]["graph_breaks"] >= 1
    assert cells["old", "compile"]["status"] == "xpass" and cells["old", "compile"]["metrics"]["graphs"] >= 1

    claimed = [{**old, "supports": {"vmap": True}}, {**branchy, "supports": {"compile": "fullgraph"}}]
    claimed_registry = write_registry(claimed, defaults=defaults, name="c.yaml")
    loud = CliRunner().invoke(cli, [*args, "--registry", str(claimed_registry)])
    assert loud.exit_code == 1
    assert "old vmap FAIL (float64, cpu): vmap: torch.func refuses this autograd.Function" in loud.output
    assert "branchy compile FAIL (float64, cpu): graph break" in loud.output


def _rank_processes() -> list[int]:
    """Live processes started from this one that run a distributed-check rank (by their PYTHONPATH and test session,
    which conftest sets: ranks of other test runs on the same machine, or in the same checkout, are not ours): started
    ones by their command line, ones a worker forked by their name (their command line is the worker's)."""
    import os
    from pathlib import Path

    ours = os.environ["PYTHONPATH"].split(os.pathsep)[0].encode()  # this checkout (conftest puts it first)
    mine = os.environ["AUDIT_TEST_SESSION"].encode()  # this session: CI runs another in the same checkout
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command, environment = (proc / "cmdline").read_bytes(), (proc / "environ").read_bytes()
            name = (proc / "comm").read_bytes().strip()
        except OSError:
            continue
        # The PYTHONPATH entry itself, not any mention: another checkout's run has this one's path elsewhere
        # in its environment (its venv's PATH).
        values = dict(item.partition(b"=")[::2] for item in environment.split(b"\0"))
        paths, session = values.get(b"PYTHONPATH"), values.get(b"AUDIT_TEST_SESSION")
        rank = b"audit.runtime.ddp_rank" in command or name == NAME
        if rank and paths and ours in paths.split(os.pathsep.encode()) and session == mine:
            found.append(int(proc.name))
    return [pid for pid in found if pid != os.getpid()]


@pytest.mark.slow
def test_a_rank_that_fails_is_named_and_the_failed_pair_is_ended(tmp_path):
    before = set(_rank_processes())
    spec = claims(MATRIX, distributed=True)
    found = observe(entry(tmp_path, target=f"{T}:BreaksOnRankOne", **spec), "distributed", examples=3)
    assert found.verdict == VIOLATED and "rank 1 raised RuntimeError: rank 1 broke" in found.message
    assert set(_rank_processes()) <= before


def test_forked_ranks_serve_the_check_are_found_and_end_with_their_pair(tmp_path):
    """The worker that holds a run's distributed cells forks its ranks (no second torch import): they join at
    once, pass a correct entry and catch the per-process-state bug, carry the name the leak check above looks
    for, and end with close()."""
    from audit.runtime import ranks as pool
    from audit.runtime.channel import Forked

    pool.close_ranks()  # a pair an earlier test started in this process
    pool.prefork_ranks()
    try:
        ranks = pool._SHARED["ranks"]
        assert all(isinstance(child.process, Forked) for child in ranks.children)
        assert pool.shared_ranks() is ranks and ranks.joined
        # Named, so that the leak check above finds them in a run (a worker's PYTHONPATH is in their environment).
        assert [_name(pid) for pid in ranks.pids] == [NAME, NAME]
        pids = ranks.pids
        spec = claims(MATRIX, distributed=True)
        assert observe(entry(tmp_path, target=f"{T}:Cube", **spec), "distributed", examples=2).verdict == HELD
        caught = observe(entry(tmp_path, target=f"{T}:CenteredRows", name="centered", **spec), "distributed",
                         examples=3)
        assert caught.verdict == VIOLATED, caught.message
        assert pool._SHARED["ranks"] is ranks and ranks.joined  # the forked pair served both cells
    finally:
        pool.close_ranks()
    assert [_name(pid) for pid in pids] == [None, None]


@pytest.mark.slow
def test_a_forked_pair_that_does_not_join_gives_way_to_started_ranks(tmp_path, monkeypatch):
    """Where forking fails (here: forked ranks that stay alive but answer the join with an error), the cell is
    not the entry's failure: a started pair serves it. (A forked rank that dies is replaced as any dead one.)"""
    import time

    from audit.runtime import ranks as pool
    from audit.runtime.rank_messages import RankError

    def broken(inbox, outbox, *args):
        outbox.send(RankError("RuntimeError: this fork is broken"))
        time.sleep(60)

    pool.close_ranks()
    monkeypatch.setattr(pool, "serve", broken)
    pool.prefork_ranks()
    try:
        assert pool._SHARED["ranks"].forked
        spec = claims(MATRIX, distributed=True)
        found = observe(entry(tmp_path, target=f"{T}:Cube", **spec), "distributed", examples=2)
        assert found.verdict == HELD, found.message
        assert not pool._SHARED["ranks"].forked and pool._SHARED["ranks"].joined
    finally:
        pool.close_ranks()


def _name(pid: int) -> bytes | None:
    """A live process's name (/proc/PID/comm); None once it is gone."""
    from pathlib import Path

    try:
        return (Path("/proc") / str(pid) / "comm").read_bytes().strip()
    except OSError:
        return None


@pytest.mark.slow
def test_no_rank_outlives_an_audit_run(write_registry, tmp_path):
    from click.testing import CliRunner

    from audit.cli import cli

    before = set(_rank_processes())
    entries = [{"name": n, "owner": "@t", "target": f"{T}:{t}", **claims(MATRIX, distributed=True)}
               for n, t in (("cube", "Cube"), ("centered", "CenteredRows"))]
    registry = write_registry(entries, defaults={"supports": {"dtypes": ["float64"], "devices": ["cpu"]}})
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(tmp_path / "o"),
                                      "--check", "distributed", "--progress", "off"])
    assert result.exit_code == 1 and "centered distributed FAIL" in result.output
    import time

    deadline = time.monotonic() + 10
    while set(_rank_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(_rank_processes()) - before


@requires_torch(*STRICT_EXPORT_OF_FUNCTIONS)
def test_export_records_each_mode(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:Cube", **claims(VECTOR, export=True)), "export", examples=3)
    assert found.details == {"non-strict": "exported", "strict": "exported"}
    assert found.verdict == HELD and found.message == ""  # both modes judged: nothing to say


def test_export_says_it_judged_the_non_strict_export_alone_where_strict_export_refuses(tmp_path):
    """On every torch: strict export refuses an explicit graph break; the cell holds on the non-strict export
    and says so, with strict export's refusal and the torch version."""
    found = observe(entry(tmp_path, target=f"{T}:cube_past_a_graph_break", kind="callable",
                          **claims(VECTOR, export=True)), "export", examples=3)
    assert found.verdict == HELD, found.message
    assert found.message.startswith("judged the non-strict export only; the strict (Dynamo) export did not run: "
                                    "not traced: Unsupported"), found.message
    assert f"(torch {torch.__version__})" in found.message
    assert found.details["not_run"] and found.details["judged"] == "the non-strict export"


@requires_torch("<2.13", "the torch where strict export cannot trace the planted Function: what its cell says")
def test_the_planted_export_bug_a_torch_cannot_reach_says_strict_export_did_not_run(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:CachedByIdentity", **claims(VECTOR, export=True)), "export")
    assert found.verdict == HELD
    assert found.message.startswith("judged the non-strict export only; the strict (Dynamo) export did not run: "
                                    "not traced: UserError"), found.message
    assert f"(torch {torch.__version__})" in found.message

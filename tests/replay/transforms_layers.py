"""Planted bugs replayed: the transforms (vmap, compile, autocast, checkpoint, opcheck, export, distributed), the
layers (modules, models), a random Function claiming determinism, and an op that writes what its schema calls
immutable; and why the other fixtures of those modules (hostile targets, polluters, building blocks) have no row.

Specs are those of the check tests (tests/checks/test_transforms.py, test_layers.py, test_corpus.py,
test_layout_corpus.py)."""

from __future__ import annotations

from tests.replay import Planted

T = "tests.fixtures.transforms"
L = "tests.fixtures.layers"
G = "tests.fixtures.global_state"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 5]}}
TWO_INPUTS = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
BATCH = {"kind": "callable", "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [0, 6], "N": [1, 4]}}
LINEAR = {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 4], "K": [1, 4], "N": [1, 4]}}
OP = {"kind": "op", "load": [T], "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
MATRIX = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 6], "N": [1, 3]}}
MODULE = {"kind": "module", "inputs": [{"shape": ["B", 3]}], "dims": {"B": [1, 3]}}
MODEL = {"kind": "model"}
SCHEMA = {"kind": "op", "load": ["tests.fixtures.ops"], "inputs": [{"shape": ["N"], "requires_grad": False}]}


def claims(spec: dict, **supports) -> dict:
    """``spec`` with these ``supports`` claims added."""
    return {**spec, "supports": {**spec.get("supports", {}), **supports}}


ROWS: list[Planted] = [
    Planted(f"{T}:OldStyleCube", "vmap", claims(VECTOR, vmap=True), f"{T}:Cube", "setup_context"),
    Planted(f"{T}:NoVmapRule", "vmap", claims(VECTOR, vmap=True), f"{T}:CubeVmapRule", "generate_vmap_rule = True"),
    Planted(f"{T}:WrongVmapRule", "vmap", claims(VECTOR, vmap=True), f"{T}:CubeVmapRule", "in_dims (1,)"),
    Planted(f"{T}:RowScaleBatched", "vmap", claims(TWO_INPUTS, vmap=True, forward_ad=True), f"{T}:RowScaleJvp",
            "jacfwd needs forward-mode AD"),
    Planted(f"{T}:BranchOnData", "compile", claims(VECTOR, compile="fullgraph"), f"{T}:Cube",
            "Data-dependent branching"),
    Planted(f"{T}:ItemInForward", "compile", claims(VECTOR, compile="fullgraph"), f"{T}:Cube", "Python number"),
    Planted(f"{T}:WrongWhenCompiled", "compile", claims(VECTOR, compile=True), f"{T}:Cube", "compiled output 0"),
    Planted(f"{T}:rows_doubled", "compile", claims(BATCH, compile=True), f"{T}:doubled",
            "recompiled for every new shape"),
    Planted(f"{T}:LinearNoAmp", "autocast", claims(LINEAR, autocast=True), f"{T}:LinearAmp", "custom_bwd",
            "float32"),
    Planted(f"{T}:LinearFloat32", "autocast", claims({**LINEAR, "reference": f"{T}:linear_reference"}, autocast=True),
            f"{T}:LinearAmp", "the reference gives bfloat16", "float32"),
    Planted("audit_transforms::wrong_fake", "opcheck", OP, "audit_transforms::scale", "test_faketensor failed"),
    Planted("audit_transforms::no_autograd", "opcheck", OP, "audit_transforms::scale", "no autograd formula"),
    Planted(f"{T}:CachedByIdentity", "export", claims(VECTOR, export=True), f"{T}:Cube",
            "strict (Dynamo) trace baked in"),
    Planted("audit_transforms::no_fake", "export", claims(OP, export=True), "audit_transforms::scale",
            "trace (non-strict export)"),
    Planted(f"{T}:CallCounting", "checkpoint", VECTOR, f"{T}:Cube", "forward is not pure"),
    Planted(f"{T}:OffDevice", "device", VECTOR, f"{T}:Cube", "output 0 is on meta for inputs on cpu"),
    Planted(f"{T}:CenteredRows", "distributed", claims(MATRIX, distributed=True), f"{T}:Cube", "per-process state"),
    Planted(f"{L}:WrongBlock", "gradcheck", MODULE, f"{L}:Block", "with respect to input 0"),
    Planted(f"{L}:WrongWeightGrad", "gradcheck", MODULE, f"{L}:Scaled", "with respect to parameter 'w'"),
    Planted(f"{L}:LostScale", "state_dict", MODULE, f"{L}:KeptScale", "register_buffer"),
    Planted(f"{L}:nan_on_some_batches", "train_step", MODEL, f"{L}:healthy", "batch seed 5", "float32"),
    Planted(f"{L}:state_across_calls", "accumulation", MODEL, f"{L}:healthy", "keeps state across calls", "float32"),
    Planted(f"{L}:keyword_state_across_calls", "accumulation", MODEL, f"{L}:keyword_batches",
            "keeps state across calls", "float32"),
    Planted("tests.fixtures.broken:Noisy", "determinism", VECTOR, "tests.fixtures.broken:Cube",
            "differs between two runs"),
    Planted("audit_tests::sneaky_scale", "alias", SCHEMA, "audit_tests::double", "its schema does not mark it mutable"),
]

HOSTILE = ("attacks the audit itself (a crash, a hang, an exit, a memory blow-up, a stray process): its cell is an "
           "error, contained by the worker, not a property that fails on a case: there is nothing to replay")
DAMAGE = ("damages the worker process for whatever runs next in it (tests/engine/test_neighbours.py): its cell is an "
          "error and its worker retires; nothing fails on a case, so there is nothing to replay")
VACUOUS = ("gives a check nothing to compare (no tensor, or nothing differentiable): its cells are skips saying so "
           "(tests/checks/test_vacuous.py), never a failing cell to replay")
BUILDING_BLOCK = ("a building block of the models nan_on_some_batches, state_across_calls and healthy, which are "
                  "replayed (rows above): not a target of its own")
SCAN = ("an audit scan fixture (a Function made inside a factory, which has no import path): correct, never a "
        "failing cell")
CORRECT_POLLUTER = ("correct (x ** 3); what it leaves behind for its neighbours in the same process is the subject of "
                    "tests/engine/test_isolation.py, not a property that fails: no failing cell to replay")

#: fixture name ("module:Name") -> why it has no row (a reference, a helper, a correct-only fixture...)
NOT_REPLAYED: dict[str, str] = {
    **{f"tests.fixtures.hostile:{name}": HOSTILE
       for name in ("Segfault", "Hang", "Exit", "HardExit", "Hog", "Spawner")},
    **{f"tests.fixtures.damage:{name}": DAMAGE for name in ("Runaway", "Hoarder", "ThreadHog", "AddressHog",
                                                            "Interrupter", "ForkReturner", "Daemonizer")},
    "tests.fixtures.damage:ThreadLeaker": ("correct (a copy) but leaves 100 threads behind: its cells pass, and the "
                                           "checkup after it retires the worker (test_neighbours.py); no failing cell"),
    "tests.fixtures.damage:Chatty": "correct (a copy); prints 64 MB a call, at normal speed: no failing cell",
    "tests.fixtures.scipy_expit:Expit": ("correct: a neighbour of the damaging targets (test_neighbours.py), no "
                                         "failing cell"),
    **{f"tests.fixtures.vacuous:{name}": VACUOUS for name in ("ReturnsStr", "ReturnsIndices", "returns_none")},
    **{f"{L}:{name}": BUILDING_BLOCK for name in ("UncheckedLog", "ClampedLog", "RunningCenter", "FixedCenter", "Net")},
    **{f"{L}:{name}": ("correct, its make_batch giving the model's inputs in one of the forms users write (a bare "
                       "tensor, a tuple): passes (tests/checks/test_layers.py, tests/scan/test_batch_forms.py), no "
                       "failing cell") for name in ("bare_tensor_batches", "two_argument_batches")},
    f"{L}:whole_batch_as_dict": ("its make_batch returns no (inputs, targets) pair: its cells are errors saying what "
                                 "was expected (tests/checks/test_layers.py), never a failing cell to replay"),
    **{f"tests.fixtures.local_function:{name}": SCAN for name in ("make_scale", "Scaled", "build")},
    f"{G}:HalfDefault": CORRECT_POLLUTER,
    f"{G}:row_sums_reference": "a reference, not a target",
    f"{G}:DeterministicOn": CORRECT_POLLUTER,
    f"{G}:Chatty": "correct (x ** 3); prints about 20 MB a call, which the worker must survive: no failing cell",
    f"{G}:RowSums": ("correct in float32, its one claimed dtype: the neighbour the isolation test protects, no "
                     "failing cell"),
    f"{G}:HangsInHalf": ("hangs in float16, a dtype it does not claim: a timeout is an error cell (contained), not a "
                         "property that fails on a case"),
    f"{G}:cube_logging_norm": (
        "its gradcheck failure needs an earlier call in the same process: the first call switches autograd off for "
        "good, so the cell fails from its second example on; the stored case alone holds, in a script as in audit "
        "repro (a cell's history is not part of its case). What it leaves behind is test_isolation.py's subject"),
    f"{T}:PrivateDropout": (
        "its failure is where a private torch.Generator (seeded once, at import) stands, which is the process's "
        "history, not the case: the audit cannot reset a private generator (audit/runtime/randomness.py says so), "
        "and one draw per run at N=1 agrees with the last 1 time in 2, so audit repro and the script fail or hold by "
        "that coin (repro held on the stored case here). A replay that reruns forward many times (2^-k to miss) "
        "would make it replayable: the checkpoint check's call (IMPURITY_RERUNS), not this table's"),
    f"{T}:GlobalDropout": "PrivateDropout's twin (see there)",
    f"{T}:cube_past_a_graph_break": ("correct (x ** 3) where it runs: its export cell holds on the non-strict "
                                     "export, strict export refusing it, and says so; no failing cell"),
    **{f"tests.fixtures.replay_thirdparty:{name}": (
        "replayed by tests/checks/test_replay_realistic.py: its compile failure shows only once the module's cache is "
        "filled by an eager call, and this table's driver runs every script in one interpreter, where an earlier "
        "script may have filled it; that test starts each script in a fresh one") for name in
       ("cached_scale_by_size", "cached_scale")},
    "tests.fixtures.replay_thirdparty:reset": "a helper of test_replay_realistic.py (empties the cache), not a target",
    f"{T}:linear_reference": "a reference (the composite autocast's policy applies to), not a target",
    f"{T}:BreaksOnRankOne": (
        "a rank that raises: the distributed script reports a rank's error and exits 1 (run by hand on its stored "
        "case: 'rank 1 raised RuntimeError: rank 1 broke', exit 1), the same code path as CenteredRows' row; "
        "observing the cell restarts the pair of ranks at every failing example (about 50 s here), too slow for "
        "this suite: tests/checks/test_transforms.py (slow) keeps the cell"),
    "tests.fixtures.upgrade:Doubler": (
        "correct unless AUDIT_TEST_ENVIRONMENT=broken, which stands in for a torch upgrade: the bug is the "
        "environment's, not code a twin could replace (tests/cli/test_scale.py shows the regression)"),
}

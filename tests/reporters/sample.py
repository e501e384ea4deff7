"""A constructed matrix with every status, two devices, several owners and a shrunk case: reporters' input."""

from __future__ import annotations

import copy

from audit.results.matrix import Matrix


def _cell(check, dtype, device, status, message="", seconds=0.25, claimed=True, **extra):
    cell = {"check": check, "dtype": dtype, "device": device, "status": status, "claimed": claimed, "examples": 20,
            "seconds": seconds, "message": message,
            "repro": f"audit repro ENTRY {check} --dtype {dtype} --device {device} --seed 0"}
    cell.update(extra)
    return cell


def _entry(name, owners, line, cells, digest="0" * 64):
    for cell in cells:
        cell["repro"] = cell["repro"].replace("ENTRY", name)
    return {"name": name, "owner": owners, "kind": "function", "target": f"pkg.ops:{name.title()}",
            "digest": digest, "line": line, "cells": cells}


MATRIX = {
    "schema": "audit-matrix/1",
    "created": "2026-11-29T10:00:00Z",
    "registry": "registry.yaml",
    "environment": {"torch": "2.13.0+cpu", "python": "3.11.7", "cuda": None, "devices": ["cpu"],
                    "platform": "Linux-x86_64", "git_commit": "abc123", "registry_sha256": "f" * 64, "seed": 0,
                    "examples": 20, "compile_backend": "aot_eager"},
    "entries": [
        _entry("cube", ["@ml-kernels"], 9, [
            _cell("forward", "float64", "cpu", "pass"),
            _cell("gradcheck", "float64", "cpu", "fail",
                  "Jacobian mismatch for output 0 with respect to input 0: max |analytic - numeric| = 6 at "
                  "d out[0] / d in[0] (analytic -3, numeric 3); on ([1]) with N=1", seconds=0.5,
                  kind="Jacobian mismatch for output 0 with respect to input 0",
                  case={"dims": {"N": 1}, "args": [{"shape": [1], "dtype": None, "requires_grad": True,
                                                    "values": [1.0]}]}),
            _cell("gradcheck", "float64", "cuda", "skip", "CUDA is not available here"),
            _cell("vmap", "float64", "cpu", "unsupported", "not claimed (supports.vmap); old style", claimed=False),
            _cell("compile", "float64", "cpu", "xpass", "not claimed, yet held on 5 examples", claimed=False,
                  metrics={"backend": "aot_eager", "graphs": 2, "shapes": 4, "compile_seconds": 1.5}),
        ]),
        _entry("softmax", ["@ml-kernels", "@vision"], 20, [
            _cell("forward", "float64", "cpu", "pass"),
            _cell("gradcheck", "float64", "cpu", "pass"),
            _cell("compile", "float64", "cpu", "waived", "waived (graph break, tracked in #123) until 2027-03-01"),
        ]),
        _entry("hang", ["@speech"], 31, [
            _cell("forward", "float64", "cpu", "error", "timed out after 300 s in forward on ([3])", seconds=300.0,
                  kind="error: timed out"),
        ]),
    ],
    "summary": {"pass": 3, "fail": 1, "unsupported": 1, "waived": 1, "xpass": 1, "skip": 1, "error": 1},
    "verdict": "fail",
}


def matrix() -> dict:
    """A fresh copy."""
    return copy.deepcopy(MATRIX)


def typed(data: dict) -> Matrix:
    """``data`` as the reporters take it."""
    return Matrix.from_json(data)


def hostile() -> dict:
    """Every string a registry or an exception could put there, made hostile."""
    data = matrix()
    entry = data["entries"][0]
    entry["name"] = "<script>alert('name')</script>"
    entry["owner"] = ['"><img src=x onerror=alert(1)>']
    entry["cells"][1]["message"] = "</script><script>alert('message')</script> & \x00\x1b[31m"
    entry["cells"][1]["case"] = {"note": "</script><b>case</b>"}
    return data


#: wide()'s two failing cells, (entry index, check) -> (status, message).
FAILED = {(3, "gradcheck"): ("fail", "max |analytic - numeric| = 0.5 at d out[0] / d in[1] (analytic 1, numeric 0.5)"),
          (5, "compile"): ("error", "timed out after 300 s during compile (float64, cpu)")}


def wide() -> dict:
    """Nine entries with a cell in every contract check, each on the CPU and on CUDA, whose every CUDA cell is a
    skip for one same reason (a machine without a GPU): the first screen of a real registry."""
    from audit.catalog.checks import CATALOG

    no_gpu = "CUDA is not available here (torch.cuda.is_available() is False)"
    entries = []
    for i, name in enumerate(["logsumexp", "softplus", "softplus_mlp", "rms_norm", "fused_gelu", "sparse_mm",
                              "complex_filter", "scatter_add_with_a_long_name", "classifier"]):
        cells = [_cell(check, "float64", "cpu", *FAILED.get((i, check), ("pass",))) for check in CATALOG]
        cells += [_cell(check, "float64", "cuda", "skip", no_gpu) for check in CATALOG]
        entries.append(_entry(name, ["@ml-kernels"], 5 + 10 * i, cells))
    data = {**copy.deepcopy(MATRIX), "entries": entries, "verdict": "fail"}
    data["summary"] = {"pass": 9 * len(CATALOG) - 2, "fail": 1, "error": 1, "skip": 9 * len(CATALOG)}
    return data


def _case(*shapes) -> dict:
    return {"dims": {}, "args": [{"shape": list(s), "dtype": None, "requires_grad": True, "values": []}
                                 for s in shapes]}


#: many()'s causes: (check, dtype, claimed, status, kind, message with {n} for a number that differs by cell).
_GRADIENT = ("gradient of input 1: max |analytic - numeric| = {n}.5 at index (0, {n}) (analytic {n}, numeric 0.5); "
             "on ([{n}, 3])")
CAUSES = (
    ("gradcheck", "float64", True, "fail", "gradient of input 1", _GRADIENT),
    ("gradcheck", "float32", True, "fail", "gradient of input 1", _GRADIENT),
    ("forward", "float64", True, "fail", "output 0",
     "output 0: max |got - expected| = {n}e-3 > atol 1e-10 at index ({n},); on ([{n}])"),
    ("compile", "float64", True, "fail", "raised RuntimeError (at pkg/ops.py:41)",
     "raised RuntimeError: size mismatch: {n} vs {n}1 (at pkg/ops.py:41); on ([{n}])"),
    ("compile", "float64", True, "fail", "raised RuntimeError (at pkg/ops.py:97)",
     "raised RuntimeError: size mismatch: {n} vs {n}1 (at pkg/ops.py:97); on ([{n}])"),
    ("vmap", "float64", True, "error", "error: timed out", "timed out after {n}00 s during vmap (float64, cpu)"),
    ("dtype", "float16", False, "error", "output 0", "output 0 is not finite in float16 ({n} of {n}0 elements)"),
)


def many() -> dict:
    """A registry of 30 entries of three owners whose 140 failing cells have 6 causes (two raising sites of one
    exception are two causes; gradcheck's float64 and float32 cells one), one of them unclaimed probes."""
    owners = (["@kernels"], ["@vision"], ["@kernels", "@speech"])
    entries = []
    for i in range(30):
        name = f"op{i:02d}"
        cells = [_cell(check, dtype, "cpu", status, message.format(n=i + 1), claimed=claimed, kind=kind,
                       case=_case([i + 1, 3]))
                 for check, dtype, claimed, status, kind, message in CAUSES
                 if not (check == "compile" and i % 2 != int(kind.endswith("97)"))) and (check != "vmap" or i < 10)]
        entries.append(_entry(name, owners[i % 3], 4 + 12 * i, cells))
    data = {**copy.deepcopy(MATRIX), "entries": entries, "verdict": "fail"}
    data["summary"] = {"fail": 120, "error": 40}
    return data

"""A seeded generator of invalid registries, one mutation class at a time, each invalid by construction."""

from __future__ import annotations

import copy
import random

import yaml

BASE = {
    "version": 1,
    "defaults": {"owner": "@team", "supports": {"dtypes": ["float64", "float32"]}},
    "entries": [
        {"name": "cube", "target": "pkg.ops:Cube", "reference": "pkg.ref:cube",
         "inputs": [{"shape": ["B", 3], "domain": [-2, 2], "kinks": [0]}, {"value": 1.5}],
         "dims": {"B": [0, 4]}, "mutates": [0], "supports": {"vmap": True, "compile": "fullgraph"},
         "tolerance": {"float64": {"atol": 1e-7, "rtol": 1e-7}},
         "expect": [{"check": "compile", "status": "fail", "reason": "tracked", "until": "2027-03-01"}]},
        {"name": "op", "kind": "op", "target": "ns::op.default", "inputs": [{"shape": ["N"]}]},
    ],
}

#: (key path, values of the wrong type or out of range for it)
WRONG = [
    (("version",), [2, "1", None, [1]]),
    (("entries",), ["x", 3, {"a": 1}]),
    (("entries", 0, "name"), [[], {}, 3, "", "a b", "x" * 201]),
    (("entries", 0, "owner"), [3, {}, [], ""]),
    (("entries", 0, "target"), [3, [], "no-colon", "a:b:c"]),
    (("entries", 0, "kind"), ["class", 1]),
    (("entries", 0, "inputs"), ["x", 3, {}, []]),
    (("entries", 0, "inputs", 0, "shape"), ["B", 3, [1.5], [-1], [True], [[2]], [10 ** 19], ["9x"]]),
    (("entries", 0, "inputs", 0, "domain"), ["x", [1], [1, 2, 3], [2, 1], [0, 10 ** 400], [".inf", 1]]),
    (("entries", 0, "dims", "B"), ["x", [1], [3, 1], [0, 2 ** 31], [-1, 2]]),
    (("entries", 0, "supports", "dtypes"), [["float8"], "float64", [1]]),
    (("entries", 0, "supports", "vmap"), ["maybe", 1, []]),
    (("entries", 0, "supports", "compile"), ["yes", 2, ["fullgraph"]]),
    (("entries", 0, "tolerance", "float64", "atol"), [-1, "x", 10 ** 400]),
    (("entries", 0, "expect", 0, "until"), ["someday", "2027-02-30", 5]),
    (("entries", 0, "expect", 0, "check"), ["nope", 3]),
    (("entries", 0, "mutates"), [[9], "0", [-1]]),
    (("entries", 1, "target"), ["pkg.ops:Cube", "ns:::x"]),
]
CONTROL = [chr(c) for c in (*range(9), 11, 12, *range(14, 32), 127)]
TAGS = ["!!python/object:os.system", "!!python/name:os.system", "!foo", "!!binary", "!!set"]


def mutants(seed: int, count: int):
    """``count`` (class, bytes) pairs, each an invalid registry."""
    rng = random.Random(seed)
    classes = [wrong_type, unknown_key, missing_key, duplicate, tagged, alias_bomb, recursive_alias, deep,
               control_character, bad_encoding]
    for i in range(count):
        mutate = classes[i % len(classes)]
        yield mutate.__name__, mutate(rng)


def _text(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10 ** 6)


def _set(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _mappings(data, path=()):
    if isinstance(data, dict):
        yield path
        for key, value in data.items():
            yield from _mappings(value, path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _mappings(value, path + (i,))


def wrong_type(rng) -> bytes:
    data = copy.deepcopy(BASE)
    path, values = rng.choice(WRONG)
    _set(data, path, rng.choice(values))
    return _text(data).encode()


def unknown_key(rng) -> bytes:
    data = copy.deepcopy(BASE)
    paths = [p for p in _mappings(data) if "dims" not in p and "tolerance" not in p[-1:]]
    _set(data, rng.choice(paths) + (rng.choice(["vmapp", "Name", "extra", "_x"]),), rng.choice([1, "x", [1]]))
    return _text(data).encode()


def missing_key(rng) -> bytes:
    data = copy.deepcopy(BASE)
    path = rng.choice([("version",), ("entries",), ("entries", 0, "name"), ("entries", 1, "target"),
                       ("entries", 1, "inputs"), ("entries", 0, "expect", 0, "reason"), ("defaults", "owner")])
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return _text(data).encode()


def duplicate(rng) -> bytes:
    text = _text(BASE)
    assert "- name: op\n" in text
    if rng.random() < 0.5:
        return text.replace("- name: op\n", "- name: cube\n").encode()
    return text.replace("- name: op\n", "- name: op\n  name: op2\n").encode()


def tagged(rng) -> bytes:
    lines = _text(BASE).splitlines()
    candidates = [i for i, line in enumerate(lines) if ": " in line and not line.rstrip().endswith(":")]
    i = rng.choice(candidates)
    key, _, value = lines[i].partition(": ")
    lines[i] = f"{key}: {rng.choice(TAGS)} {value}"
    return ("\n".join(lines) + "\n").encode()


def alias_bomb(rng) -> bytes:
    width, depth = rng.randint(10, 30), rng.randint(5, 9)
    lines = [f"x0: &x0 [{', '.join(['lol'] * width)}]"]
    lines += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * width)}]" for i in range(1, depth)]
    where = rng.choice(["top", "entry"])
    body = _text(BASE)
    if where == "entry":
        assert "  inputs:\n  - shape:\n    - N\n" in body
        return ("\n".join(lines) + "\n" + body.replace("  inputs:\n  - shape:\n    - N\n",
                                                        f"  inputs: *x{depth - 1}\n", 1)).encode()
    return (body + "\n".join(lines) + "\n").encode()


def recursive_alias(rng) -> bytes:
    return rng.choice([b"version: 1\nentries: &e [*e]\n", b"version: 1\nentries:\n- &e {name: *e}\n",
                       b"version: 1\ndefaults: &d {supports: *d}\nentries: []\n"])


def deep(rng) -> bytes:
    depth = rng.randint(65, 600)
    if rng.random() < 0.5:
        return b"version: 1\nentries: " + b"[" * depth + b"]" * depth + b"\n"
    return ("version: 1\nentries:\n" + "".join("  " * i + "- a:\n" for i in range(depth))).encode()


def control_character(rng) -> bytes:
    text = _text(BASE)
    i = rng.randrange(len(text))
    return (text[:i] + rng.choice(CONTROL) + text[i:]).encode()


def bad_encoding(rng) -> bytes:
    text = _text(BASE)
    choice = rng.randrange(3)
    if choice == 0:
        return text.encode("utf-16-le")
    if choice == 1:
        return text.encode("utf-16-be")
    i = rng.randrange(len(text))
    return text[:i].encode() + bytes([rng.choice([0xff, 0xfe, 0xc3, 0x80])]) + text[i:].encode()

"""``audit scan --source PATH...``: custom autograd code found by reading sources, running nothing.

Python: classes deriving from ``torch.autograd.Function`` (through import aliases, assignments,
re-exports and subclasses of other such classes, nested ones included), ``torch.library.custom_op``,
``Library(ns).define`` / ``torch.library.define`` and ``register_autograd`` uses. C++/CUDA:
``TORCH_LIBRARY`` / ``TORCH_LIBRARY_FRAGMENT`` blocks (each ``m.def``) and ``TORCH_LIBRARY_IMPL`` blocks
(each ``m.impl`` and its dispatch key).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from audit.scan.findings import Finding, merged

FUNCTION_ROOTS = {"torch.autograd.Function", "torch.autograd.function.Function",
                  "torch.autograd.function.InplaceFunction", "torch.autograd.function._SingleLevelFunction"}
CUSTOM_OP = {"torch.library.custom_op", "torch._library.custom_ops.custom_op"}
DEFINE = {"torch.library.define"}
LIBRARY = {"torch.library.Library"}
REGISTER_AUTOGRAD = {"torch.library.register_autograd"}
SOURCES = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp")


@dataclass
class _Module:
    name: str
    path: Path
    imports: dict = field(default_factory=dict)   # local name -> dotted full name
    classes: list = field(default_factory=list)   # (qualname, [base dotted names], line)


def scan_sources(paths, root: Path | None = None) -> list[Finding]:
    """Every custom Function and operator defined under ``paths`` (files or folders)."""
    root = (root or Path.cwd()).resolve()
    files = sorted({f.resolve() for p in map(Path, paths) for f in (p.rglob("*") if p.is_dir() else [p])
                    if f.is_file()})
    modules, findings = [], []
    for file in files:
        if file.suffix == ".py":
            module = _Module(_module_name(file, root), file)
            try:
                tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"), filename=str(file))
            except SyntaxError as exc:
                findings.append(Finding("error", f"{file}:{exc.lineno}: cannot parse: {exc.msg}", str(file)))
                continue
            _Visitor(module, findings).visit(tree)
            modules.append(module)
        elif file.suffix in SOURCES:
            findings += _cpp(file, root)
    findings += _functions(modules, root)
    return merged(findings)


def _module_name(file: Path, root: Path) -> str:
    """The dotted name Python would import ``file`` by: relative to the folder above its outermost package
    (a folder with ``__init__.py``), else to ``root``."""
    top = file.parent
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    if top == file.parent and not (file.parent / "__init__.py").is_file():
        top = root if file.is_relative_to(root) else file.parent
    relative = file.relative_to(top)
    parts = list(relative.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _Visitor(ast.NodeVisitor):
    """One module: its import table, its classes (with qualnames), its operator definitions."""

    def __init__(self, module: _Module, findings: list):
        self.module, self.findings = module, findings
        self.scope: list[str] = []
        self.libraries: dict[str, str] = {}

    def visit_Import(self, node):
        for alias in node.names:
            if alias.asname:
                self.module.imports[alias.asname] = alias.name
            else:
                self.module.imports.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        base = node.module or ""
        if node.level:
            package = self.module.name.split(".")
            keep = len(package) - node.level + (1 if self.module.path.name == "__init__.py" else 0)
            base = ".".join(package[:max(keep, 0)] + ([node.module] if node.module else []))
        for alias in node.names:
            self.module.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def visit_Assign(self, node):
        target = node.targets[0] if len(node.targets) == 1 else None
        full = self._resolve(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        if isinstance(target, ast.Name) and full:
            self.module.imports[target.id] = full  # Function = torch.autograd.Function, and the like
        if (isinstance(target, ast.Name) and isinstance(node.value, ast.Call)
                and self._resolve(node.value.func) in LIBRARY):
            namespace = _string(node.value.args[0]) if node.value.args else None
            if namespace:
                self.libraries[target.id] = namespace
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        qualname = ".".join(self.scope + [node.name])
        self.module.classes.append((qualname, [self._resolve(b) for b in node.bases], node.lineno))
        if not self.scope:
            self.module.imports.setdefault(node.name, f"{self.module.name}.{qualname}")
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node):  # decorators are Call nodes: visit_Call sees custom_op there
        self.scope += [node.name, "<locals>"]
        self.generic_visit(node)
        del self.scope[-2:]

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node):
        self._maybe_op(node, node.lineno)
        self.generic_visit(node)

    def _maybe_op(self, node, line: int) -> None:
        if not isinstance(node, ast.Call):
            return
        func = self._resolve(node.func)
        first = _string(node.args[0]) if node.args else None
        where = f"{self.module.path}:{line}"
        if func in CUSTOM_OP | DEFINE and first and "::" in first:
            self._add("op", first.split("(")[0].strip(), where)
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "define" and first and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in self.libraries:
            self._add("op", f"{self.libraries[node.func.value.id]}::{first.split('(')[0].strip()}", where)
        elif func in REGISTER_AUTOGRAD and first:
            self._add("autograd registration", first, where)

    def _add(self, kind: str, target: str, where: str) -> None:
        self.findings.append(Finding(kind, target, str(self.module.path), sites=[where]))

    def _resolve(self, node) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.module.imports.get(node.id, node.id)
        return ".".join([head] + parts[::-1])


def _functions(modules: list[_Module], root: Path) -> list[Finding]:
    """Classes whose bases lead to torch.autograd.Function, through aliases and re-exports (a fixpoint)."""
    exported = {f"{m.name}.{local}": full for m in modules for local, full in m.imports.items()}
    defined = {f"{m.name}.{q}": (m, q, line) for m in modules for q, _, line in m.classes}

    def canonical(name: str | None, depth: int = 0) -> str | None:
        while name in exported and exported[name] != name and depth < 20:
            name, depth = exported[name], depth + 1
        return name

    functions: set[str] = set()
    changed = True
    while changed:
        changed = False
        for m in modules:
            for qualname, bases, _ in m.classes:
                full = f"{m.name}.{qualname}"
                if full in functions:
                    continue
                resolved = [canonical(b) for b in bases]
                if any(b in FUNCTION_ROOTS or b in functions for b in resolved):
                    functions.add(full)
                    changed = True
    found = []
    for full in sorted(functions, key=lambda f: (str(defined[f][0].path), defined[f][2])):
        module, qualname, line = defined[full]
        found.append(Finding("function", f"{module.name}:{qualname}", str(module.path),
                             sites=[f"{module.path}:{line}"]))
    return found


_BLOCK = re.compile(r"\b(TORCH_LIBRARY|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL)\s*\("
                    r"\s*(\w+)\s*,\s*(\w+)(?:\s*,\s*(\w+))?\s*\)\s*\{")
_DEF = re.compile(r"\b\w+\s*\.\s*def\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\()?\s*\"([A-Za-z_][\w.]*)")
_IMPL = re.compile(r"\b\w+\s*\.\s*impl\s*\(\s*(?:TORCH_SELECTIVE_NAME\s*\()?\s*\"([A-Za-z_][\w.:]*)\"")


def _cpp(file: Path, root: Path) -> list[Finding]:
    text = file.read_text(encoding="utf-8", errors="replace")
    found = []
    for match in _BLOCK.finditer(text):
        macro, namespace = match.group(1), match.group(2)
        key = match.group(3) if macro == "TORCH_LIBRARY_IMPL" else None
        body = _block(text, match.end() - 1)
        base = match.end()
        pattern = _IMPL if key else _DEF
        for item in pattern.finditer(body):
            line = text.count("\n", 0, base + item.start()) + 1
            name = item.group(1).split("::")[-1]
            kind = "op" if not key else f"kernel ({key})"
            found.append(Finding(kind, f"{namespace}::{name}", str(file), sites=[f"{file}:{line}"]))
    return found


def _block(text: str, brace: int) -> str:
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1:i]
    return text[brace + 1:]


def _string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

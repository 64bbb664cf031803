"""Static rules for Triton candidates, on the Python AST (never on the text): the host side of the
module -- `ModelNew`, its helpers, module-level code -- may only allocate, take views and shapes,
do integer arithmetic on sizes and launch the module's `@triton.jit` kernels. The operator is
computed by the kernels, or the candidate is rejected with the rule's one-line reason.

`@triton.jit` bodies are checked against an allow-list (T.JIT_NODES, names of Triton, math, the
module's kernels and constants, T.JIT_BUILTINS): Python the compiler would resolve statically
(a branch on `hasattr`) runs on the interpreter, so it is not allowed at all; the compile gate
(build.py) checks the rest. What a static rule cannot see (a result cached by content, work skipped when a
call looks timed, a side stream reached through a dynamic path) is the runtime's to report:
fresh buffers and addresses per call, outputs checked for calls drawn after the round, the
device-wide synchronise before the end event, the integrity snapshot and the host guard (devloop/),
judged by the harness (harness/runtime_evidence.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagekernel.seam import LintFinding
from sagekernel.targets.triton import lint_tables as T
from sagekernel.tasks.task import Task


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        path = _dotted(target)
        if (
            path
            and path[-1] in ("jit", "autotune", "heuristics")
            and path[0] in ("triton", "jit", "autotune", "heuristics")
        ):
            return True
    return False


class _Checker:
    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.findings: list[LintFinding] = []
        self.seen: set[tuple[str, int]] = set()
        self.modules: dict[str, str] = {}  # local name -> module path ("tl" -> "triton.language")
        self.imported: dict[str, str] = {}  # local name -> "module.attr" from `from m import a`
        self.module_level: set[str] = set()
        self.tensor_params: dict[str, set[int]] = {}  # helper function -> positions holding tensors
        self.jit_functions: set[str] = set()  # module-level @triton.jit functions
        self.constants: set[str] = set()  # module-level names bound to constants

    def add(self, rule: str, node: ast.AST, detail: str = "") -> None:
        line = getattr(node, "lineno", 0) or 0
        if (rule, line) in self.seen:
            return
        self.seen.add((rule, line))
        excerpt = self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""
        reason = T.REASONS[rule] + (f" ({detail})" if detail else "")
        self.findings.append(LintFinding(rule=rule, reason=reason, line=line or None, excerpt=excerpt))

    # -- module level --------------------------------------------------------------------------
    def module(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.import_(node)
        functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        has_model_new = False
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[node.name] = node
                self.module_level.add(node.name)
                if _is_jit(node):
                    self.jit_functions.add(node.name)
            elif isinstance(node, ast.ClassDef):
                self.module_level.add(node.name)
                has_model_new |= node.name == "ModelNew"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.module_level.add(n.id)
                            if isinstance(t, ast.Name) and _constant_value(node.value):
                                self.constants.add(n.id)
                if node.value is not None and _mutable_value(node.value):
                    self.add("module_state", node)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            elif isinstance(node, ast.If) and _is_main_guard(node):
                self.add("module_code", node, "if __name__ == '__main__'")
                continue
            else:
                self.add("module_code", node, type(node).__name__)
        if not has_model_new:
            self.add("no_model_new", tree)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _is_jit(node):
                    self.jit_body(node)
                    for dec in node.decorator_list:
                        self.host(dec, tensors=set())
                else:
                    self.function(node, tensors=set())
            elif isinstance(node, ast.ClassDef):
                self.class_(node)
            elif not isinstance(node, (ast.Import, ast.ImportFrom)):
                self.host(node, tensors=set())
        del functions

    def import_(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not T.module_allowed(alias.name):
                    self.add("import", node, alias.name)
                    continue
                local = alias.asname or alias.name.split(".")[0]
                self.modules[local] = alias.name if alias.asname else alias.name.split(".")[0]
            return
        mod = node.module or ""
        if node.level or not T.module_allowed(mod):
            self.add("import", node, "." * node.level + mod)
            return
        for alias in node.names:
            full = f"{mod}.{alias.name}"
            local = alias.asname or alias.name
            if alias.name == "*":
                self.add("import", node, f"from {mod} import *")
            elif T.module_allowed(full) and (full in T.SUBMODULES or full.startswith("triton.language")):
                self.modules[local] = full
            elif T.path_allowed(full.split(".")):
                self.imported[local] = full
            else:
                self.add("import", node, full)

    def class_(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            path = self.resolve(base)
            if path not in (["torch", "nn", "Module"],):
                self.add("class_base", base, ast.unparse(base))
        for kw in node.keywords:
            self.add("class_base", kw, ast.unparse(kw))
        for dec in node.decorator_list:
            self.add("decorator", dec, ast.unparse(dec))
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg for a in item.args.args[1:]} if item.name == "forward" else set()
                self.function(item, tensors=params, method=item.name)
            elif isinstance(item, ast.Pass) or (
                isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)
            ):
                continue
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                if item.value is not None and _mutable_value(item.value):
                    self.add("module_state", item, "class attribute")
                self.host(item, tensors=set())
            else:
                self.add("module_code", item, f"class body: {type(item).__name__}")

    def function(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef, *, tensors: set[str], method: str | None = None
    ) -> None:
        if isinstance(fn, ast.AsyncFunctionDef):
            self.add("async", fn)
        for dec in fn.decorator_list:
            path = self.resolve(dec.func if isinstance(dec, ast.Call) else dec)
            if path not in (["staticmethod"], ["property"]):
                self.add("decorator", dec, ast.unparse(dec))
        if method is None:
            positions = self.tensor_params.get(fn.name, set())
            tensors = {a.arg for i, a in enumerate(fn.args.args) if i in positions} | tensors
        tensors = set(tensors)
        for stmt in fn.body:
            self.host(stmt, tensors=tensors, in_init=method == "__init__", in_forward=method == "forward")

    def jit_body(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """An allow-list: the node types of T.JIT_NODES; names that are parameters, locals, the
        module's kernels and constants, Triton/math modules or T.JIT_BUILTINS; no dunders."""
        local = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        # The decorators are host code (checked there); the body and the signature are the kernel.
        body = [n for root in (fn.args, *fn.body) for n in ast.walk(root)]
        for node in body:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
        for node in body:
            if isinstance(node, ast.Attribute) and node.attr in T.DEVICE_CLOCKS:
                self.add("device_clock", node, node.attr)
            elif isinstance(node, ast.Name) and node.id in self.modules and self.modules[node.id] == "torch":
                self.add("torch_in_kernel", node)
            elif type(node).__name__ not in T.JIT_NODES:
                self.add("jit_body", node, type(node).__name__)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
                self.add("jit_body", node, node.attr)
            elif isinstance(node, ast.Attribute):
                path = self.resolve(node)
                if path and path[0] not in local and not _jit_path_allowed(path):
                    self.add("jit_body", node, ".".join(path))
            elif (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id not in local
                and not self.jit_name_allowed(node.id)
            ):
                self.add("jit_body", node, node.id)

    def jit_name_allowed(self, name: str) -> bool:
        if name in T.JIT_BUILTINS or name in self.jit_functions or name in self.constants:
            return True
        if name in self.modules:
            return _jit_path_allowed(self.modules[name].split("."))
        if name in self.imported:
            return _jit_path_allowed(self.imported[name].split("."))
        return False

    # -- host code -----------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> list[str] | None:
        """The dotted path with import aliases expanded (`F.softmax` -> torch.nn.functional.softmax)."""
        path = _dotted(node)
        if not path:
            return None
        head = path[0]
        if head in self.modules:
            return self.modules[head].split(".") + path[1:]
        if head in self.imported:
            return self.imported[head].split(".") + path[1:]
        return path

    def host(
        self, root: ast.AST, *, tensors: set[str], in_init: bool = False, in_forward: bool = False
    ) -> None:
        for node in _walk_outer(root):
            self.node(node, tensors, in_init, in_forward)

    def node(self, node: ast.AST, tensors: set[str], in_init: bool, in_forward: bool) -> None:
        if isinstance(node, (ast.Try, ast.TryStar)):
            self.add("try_except", node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.add("module_state", node, "global/nonlocal")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if self.resolve(
                    item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr
                ) != ["torch", "no_grad"]:
                    self.add("context_manager", item.context_expr, ast.unparse(item.context_expr)[:60])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.add("import", node, "import inside a function")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.add("nested_def", node, node.name)
        elif isinstance(node, ast.Lambda):
            pass
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            self.assign(node, tensors, in_init)
        elif isinstance(node, ast.Delete):
            self.add("monkey_patch", node, "del")
        elif isinstance(node, ast.Return) and in_forward and node.value is not None:
            for n in ast.walk(node.value):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                    self.add("cached_output", n, ast.unparse(n))
        elif isinstance(node, ast.Call):
            self.call(node, tensors)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Name):
            if node.id in T.FORBIDDEN_NAMES:
                self.add("reference", node, node.id)
            elif node.id in T.FORBIDDEN_BUILTINS and node.id not in self.module_level:
                self.add("builtin", node, node.id)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                self.add("tensor_math", node, "@")
            elif _mentions(node, tensors):
                self.add("tensor_math", node, ast.unparse(node)[:60])
        elif isinstance(node, (ast.UnaryOp, ast.Compare, ast.BoolOp)):
            if _mentions(node, tensors):
                self.add("tensor_math", node, ast.unparse(node)[:60])
        elif isinstance(node, ast.Subscript):
            if (
                isinstance(node.value, ast.Name)
                and node.value.id in tensors
                and _mentions(node.slice, tensors)
            ):
                self.add("tensor_math", node, "indexing a tensor with a tensor")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and T.PATH_RX.match(node.value):
            self.add("filesystem", node, node.value[:40])

    def assign(
        self, node: ast.Assign | ast.AugAssign | ast.AnnAssign, tensors: set[str], in_init: bool
    ) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                    self.add("tensor_write", n, ast.unparse(n)[:60])
                elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    root = _dotted(n)
                    if root and root[0] == "self" and len(root) == 2:
                        if not in_init:
                            self.add("module_state", n, f"self.{n.attr} set outside __init__")
                    else:
                        self.add("monkey_patch", n, ast.unparse(n)[:60])
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in tensors
        ):
            self.add("tensor_math", node, ast.unparse(node)[:60])
        if value is not None:
            path = self.resolve(value)
            if (isinstance(value, ast.Name) and (value.id in self.modules or value.id in self.imported)) or (
                path and path[0] in ("torch", "triton") and isinstance(value, ast.Attribute)
            ):
                self.add("module_alias", node, ast.unparse(node)[:60])
            if _tensor_valued(value, tensors, self):
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            tensors.add(n.id)

    def attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr != "__init__":
            self.add("dunder", node, node.attr)
            return
        path = self.resolve(node)
        if path and path[0] in ("torch", "triton") and not T.path_allowed(path):
            self.add(T.rule_for_path(path), node, ".".join(path))

    def call(self, node: ast.Call, tensors: set[str]) -> None:
        func = node.func
        if isinstance(func, ast.Subscript):  # kernel[grid](...): a launch
            return
        if isinstance(func, ast.Name):
            name = func.id
            if name in T.FORBIDDEN_BUILTINS and name not in self.module_level:
                return  # reported by the Name visit
            if name in self.module_level and name in self.tensor_params_targets():
                positions = {i for i, a in enumerate(node.args) if _mentions(a, tensors)}
                self.tensor_params.setdefault(name, set()).update(positions)
            return
        if not isinstance(func, ast.Attribute):
            return
        path = self.resolve(func)
        if path and path[0] in ("torch", "triton"):
            return  # attribute() judged the path
        owner = func.value
        if (isinstance(owner, ast.Name) and owner.id == "super") or (
            isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
        ):
            return
        method = func.attr
        if method in T.READBACK_METHODS:
            self.add("host_readback", node, method)
        elif method in T.MUTATING_METHODS and isinstance(owner, (ast.Name, ast.Attribute)):
            root = _dotted(owner)
            if root and (root[0] in self.module_level or root[0] == "self"):
                self.add("module_state", node, f"{'.'.join(root)}.{method}()")
        elif method not in T.ALLOWED_METHODS:
            self.add("tensor_method", node, f".{method}()")

    def tensor_params_targets(self) -> set[str]:
        return self.module_level


def _walk_outer(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under `root` in source order (nested defs reported, not entered twice)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _mentions(node: ast.AST, names: set[str]) -> bool:
    if not names:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in names:
            return True
        if isinstance(n, ast.Attribute) and n.attr in T.SHAPE_ATTRS:
            return False  # x.shape[0] + 1, x.numel() // 2: shape arithmetic
    return False


def _tensor_valued(value: ast.AST, tensors: set[str], checker: _Checker) -> bool:
    if isinstance(value, ast.Name):
        return value.id in tensors
    if isinstance(value, ast.Subscript):
        return isinstance(value.value, ast.Name) and value.value.id in tensors
    if isinstance(value, ast.Call):
        path = checker.resolve(value.func)
        if path and path[0] == "torch" and path[-1] in T.TORCH_ALLOCATORS:
            return True
        if isinstance(value.func, ast.Attribute) and value.func.attr in T.VIEW_METHODS:
            return _tensor_valued(value.func.value, tensors, checker)
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_tensor_valued(e, tensors, checker) for e in value.elts)
    return False


def _mutable_value(value: ast.AST) -> bool:
    if isinstance(value, (ast.Dict, ast.Set, ast.DictComp, ast.SetComp, ast.ListComp)):
        return True
    if isinstance(value, ast.List):
        return not value.elts or not all(
            isinstance(e, ast.Call) and _dotted(e.func) in (["triton", "Config"], ["Config"])
            for e in value.elts
        )
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict", "bytearray")
    return False


def _jit_path_allowed(path: list[str]) -> bool:
    dotted = ".".join(path)
    if any(dotted == m or dotted.startswith(m + ".") for m in T.JIT_MODULES):
        return True
    return path[0] == "triton" and (len(path) == 1 or path[1] in T.JIT_TRITON_NAMES)


def _constant_value(value: ast.AST | None) -> bool:
    """A module-level binding a kernel may read: literals, arithmetic on them, `tl.constexpr(...)`
    and Triton dtypes (attribute chains), nothing that calls host code."""
    if value is None:
        return False
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            path = _dotted(node.func)
            if not path or path[-1] != "constexpr":
                return False
        elif isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)):
            return False
    return True


def _is_main_guard(node: ast.If) -> bool:
    return "__main__" in ast.unparse(node.test)


def lint_source(source: str, task: Task | None = None) -> list[LintFinding]:
    """Every rule violation in `source`, at most one per (rule, line), in line order."""
    del task  # the rules do not depend on the task; ModelNew's signature is checked when it loads
    try:
        tree = ast.parse(source, filename="kernel.py")
    except SyntaxError as exc:
        return [
            LintFinding(
                "syntax", f"kernel.py does not parse: {exc.msg}", exc.lineno, (exc.text or "").strip()[:160]
            )
        ]
    checker = _Checker(source)
    checker.module(tree)
    # Helpers called with tensors: run once more now that call sites marked their tensor parameters.
    if checker.tensor_params:
        again = _Checker(source)
        again.tensor_params = checker.tensor_params
        again.module(tree)
        checker = again
    return sorted(checker.findings, key=lambda f: (f.line or 0, f.rule))

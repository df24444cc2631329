"""An RMSNorm written op by op → one ``torch.nn.functional.rms_norm`` call, as an
edit of the statements that compute it.

Recognised from the AST, never from a text template: the tail of a function
body — plain ``name = expr`` assignments ending in a ``return`` — whose
returned expression, with the assigned names substituted, is::

    X * rsqrt(mean(X², -1, keepdim=True) + EPS) [* W]          (any order of factors)
    W * (X * rsqrt(mean(X², -1, keepdim=True) + EPS)).to(DTYPE)   (transformers' LlamaRMSNorm)

where ``X²`` is ``X.pow(2)``, ``X ** 2``, ``X * X``, ``torch.pow(X, 2)`` or
``X.square()``, ``rsqrt`` is ``torch.rsqrt(.)`` or ``(.).rsqrt()``, and ``X``,
``W``, ``EPS`` are names or attributes (``self.weight``, ``self.variance_epsilon``:
evaluating them twice or not at all changes nothing). The replacement normalises
over the last dimension, as the ``mean(-1)`` did::

    return torch.nn.functional.rms_norm(X, (X.shape[-1],), W, EPS)
    return W * torch.nn.functional.rms_norm(X, (X.shape[-1],), None, EPS).to(DTYPE)

(the second keeps LlamaRMSNorm's order: normalise in X's dtype, cast, then
scale). Anything else — a ``mean`` over another dimension, an assignment to an
attribute, a statement with a side effect in between — offers no edit. The
statements replaced must hold every line the run recorded the pattern's ops on.
"""

from __future__ import annotations

import ast

from trainium_lens.analysis.fixes.source import edit_of, enclosing_function, imports_torch
from trainium_lens.model.result import Edit

FUNCTION = "torch.nn.functional.rms_norm"
TITLE = "torch.nn.functional.rms_norm"


def rms_norm_edit(text: str, file: str, lines: list[int], function: str) -> Edit | None:
    """The edit for the RMSNorm on ``lines`` of ``text``, or None where it cannot be
    written safely."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if not imports_torch(tree):
        return None  # ``torch.nn.functional`` would be an unbound name
    fn = enclosing_function(tree, min(lines))
    if fn is None or not fn.body or not isinstance(fn.body[-1], ast.Return) or fn.body[-1].value is None:
        return None
    body = fn.body
    # the shortest tail that computes it: no statement is taken that the norm does not need
    for start in range(len(body) - 1, -1, -1):
        block = body[start:]
        if not all(_plain_assign(s) for s in block[:-1]):
            return None
        replacement = _rewrite(block)
        if replacement is None:
            continue
        first, last = block[0].lineno, block[-1].end_lineno or block[-1].lineno
        if not all(first <= n <= last for n in lines):
            return None  # the recorded ops are on lines these statements do not hold
        return edit_of(text, file, block[0], block[-1], f"return {replacement}", TITLE, function)
    return None


def _plain_assign(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)


def _rewrite(block: list[ast.stmt]) -> str | None:
    env: dict[str, ast.expr] = {}
    for stmt in block[:-1]:
        assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
        env[stmt.targets[0].id] = _substitute(stmt.value, env)
    ret = block[-1]
    assert isinstance(ret, ast.Return) and ret.value is not None
    expr = _substitute(ret.value, env)
    plain = _normalised(_factors(expr))
    if plain is not None:
        x, weight, eps = plain
        w = ast.unparse(weight) if weight is not None else "None"
        return f"{FUNCTION}({x}, ({x}.shape[-1],), {w}, {eps})"
    factors = _factors(expr)
    if len(factors) == 2:
        for weight, cast in (factors, factors[::-1]):
            if _pure(weight) and _is_call(cast, "to") and isinstance(cast, ast.Call):
                assert isinstance(cast.func, ast.Attribute)
                inner = _normalised(_factors(cast.func.value))
                if inner is None or inner[1] is not None or len(cast.args) != 1 or cast.keywords:
                    continue
                if not _pure(cast.args[0]) or _mentions(weight, inner[0]):
                    continue
                x, _none, eps = inner
                dtype = ast.unparse(cast.args[0])
                return f"{ast.unparse(weight)} * {FUNCTION}({x}, ({x}.shape[-1],), None, {eps}).to({dtype})"
    return None


def _substitute(expr: ast.expr, env: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return env.get(node.id, node) if isinstance(node.ctx, ast.Load) else node

    return Sub().visit(ast.parse(ast.unparse(expr), mode="eval").body)


def _factors(expr: ast.expr) -> list[ast.expr]:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return _factors(expr.left) + _factors(expr.right)
    return [expr]


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _pure(expr: ast.expr) -> bool:
    """A name, an attribute of one, or a constant: reading it twice is reading it once."""
    if isinstance(expr, ast.Attribute):
        return _pure(expr.value)
    return isinstance(expr, (ast.Name, ast.Constant))


def _mentions(expr: ast.AST, x: str) -> bool:
    return any(ast.unparse(n) == x for n in ast.walk(expr) if isinstance(n, (ast.Name, ast.Attribute)))


def _is_call(expr: ast.expr, method: str) -> bool:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == method


def _torch_call(expr: ast.expr, name: str) -> list[ast.expr] | None:
    """The arguments of ``torch.NAME(...)``."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == name
        and isinstance(expr.func.value, ast.Name)
        and expr.func.value.id == "torch"
        and not expr.keywords
    ):
        return list(expr.args)
    return None


def _two(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value in (2, 2.0) and not isinstance(expr.value, bool)


def _squared(expr: ast.expr) -> ast.expr | None:
    """X where ``expr`` is X squared."""
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Pow) and _two(expr.right):
            return expr.left
        if isinstance(expr.op, ast.Mult) and _same(expr.left, expr.right):
            return expr.left
    if isinstance(expr, ast.Call) and not expr.keywords and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "pow" and len(expr.args) == 1 and _two(expr.args[0]):
            if not (isinstance(expr.func.value, ast.Name) and expr.func.value.id == "torch"):
                return expr.func.value
        if expr.func.attr == "square" and not expr.args:
            return expr.func.value
    args = _torch_call(expr, "pow")
    if args is not None and len(args) == 2 and _two(args[1]):
        return args[0]
    args = _torch_call(expr, "square")
    if args is not None and len(args) == 1:
        return args[0]
    return None


def _last_dim(args: list[ast.expr], keywords: list[ast.keyword]) -> bool:
    """``(-1, keepdim=True)``, ``(dim=-1, keepdim=True)``: over the last dimension, kept."""
    kw = {k.arg: k.value for k in keywords}
    dim = args[0] if args else kw.pop("dim", None)
    keep = kw.pop("keepdim", None)
    if len(args) > 1 or kw or dim is None or keep is None:
        return False
    minus_one = isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub) and _const(dim.operand, 1)
    return minus_one and _const(keep, True)


def _const(expr: ast.expr, value: object) -> bool:
    return (
        isinstance(expr, ast.Constant)
        and expr.value is value
        or (isinstance(expr, ast.Constant) and type(expr.value) is type(value) and expr.value == value)
    )


def _mean_of_square(expr: ast.expr) -> ast.expr | None:
    if _is_call(expr, "mean") and isinstance(expr, ast.Call):
        assert isinstance(expr.func, ast.Attribute)
        if _last_dim(list(expr.args), list(expr.keywords)):
            return _squared(expr.func.value)
        return None
    if isinstance(expr, ast.Call) and _torch_call(ast.Call(expr.func, [], []), "mean") is not None:
        if expr.args and _last_dim(list(expr.args[1:]), list(expr.keywords)):
            return _squared(expr.args[0])
    return None


def _rsqrt_arg(expr: ast.expr) -> ast.expr | None:
    args = _torch_call(expr, "rsqrt")
    if args is not None and len(args) == 1:
        return args[0]
    if _is_call(expr, "rsqrt") and isinstance(expr, ast.Call) and not expr.args and not expr.keywords:
        assert isinstance(expr.func, ast.Attribute)
        return expr.func.value
    return None


def _normalised(factors: list[ast.expr]) -> tuple[str, ast.expr | None, str] | None:
    """``(X, W or None, EPS)`` where the factors are X, rsqrt(mean(X²) + EPS) and at most one W."""
    for i, factor in enumerate(factors):
        arg = _rsqrt_arg(factor)
        if arg is None or not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add)):
            continue
        for mean, eps in ((arg.left, arg.right), (arg.right, arg.left)):
            x = _mean_of_square(mean)
            if x is None or not _pure(x) or not _pure(eps):
                continue
            rest = factors[:i] + factors[i + 1 :]
            xs = [f for f in rest if _same(f, x)]
            others = [f for f in rest if not _same(f, x)]
            if len(xs) != 1 or len(others) > 1 or (others and not _pure(others[0])):
                continue
            name = ast.unparse(x)
            if others and _mentions(others[0], name):
                continue
            return name, (others[0] if others else None), ast.unparse(eps)
    return None

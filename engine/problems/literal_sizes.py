"""Sizes written inline in a problem's get_inputs (`torch.rand(16, 3, 224, 224)`) named as module
constants, so that a file without SIZES still gets a derived tiny size (engine.problems.sizing)
when its shapes are not module constants. Each int literal of at least `min_value` passed to a
call in get_inputs (directly, or in a tuple or list) reads a module global `PREFIX<k>` that holds
the literal's value: the file computes exactly what it did."""

from __future__ import annotations

import ast

PREFIX = "get_inputs_size_"


class _NameSizes(ast.NodeTransformer):
    def __init__(self, min_value: int):
        self.min_value = min_value
        self.values: list[int] = []

    def named(self, node: ast.expr) -> ast.expr:
        if isinstance(node, (ast.Tuple, ast.List)):
            node.elts = [self.named(e) for e in node.elts]
            return node
        if not (isinstance(node, ast.Constant) and type(node.value) is int
                and node.value >= self.min_value):  # fmt: skip
            return node
        self.values.append(node.value)
        return ast.copy_location(ast.Name(f"{PREFIX}{len(self.values)}", ast.Load()), node)

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        node.args = [self.named(a) for a in node.args]
        for keyword in node.keywords:
            keyword.value = self.named(keyword.value)
        return node


def name_literal_sizes(tree: ast.Module, min_value: int) -> ast.Module:
    """`tree` with get_inputs' literal sizes read from module globals assigned after it."""
    for function in tree.body:
        if isinstance(function, ast.FunctionDef) and function.name == "get_inputs":
            namer = _NameSizes(min_value)
            namer.visit(function)
            tree.body += [
                ast.Assign([ast.Name(f"{PREFIX}{k}", ast.Store())], ast.Constant(value))
                for k, value in enumerate(namer.values, start=1)
            ]
    return ast.fix_missing_locations(tree)

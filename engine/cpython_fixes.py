"""Workarounds for bugs of the CPython builds we support, installed when `engine` is imported.

CPython 3.11 before 3.11.8 and 3.12 before 3.12.2 share one recursion counter among every
thread that turns a parse into `ast` objects (gh-106905): two threads parsing at once, with a
garbage collection between, fail with "SystemError: AST constructor recursion depth mismatch".
The engine parses in threads (`bench --jobs`, the LLM generator's concurrent proposals, Triton
compiles in the compile pool), so on those builds `ast.parse` takes one process-wide lock.
"""

import ast
import functools
import sys
import threading

AST_PARSE_RACES = sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2)


def serialize_ast_parse() -> None:
    parse, lock = ast.parse, threading.Lock()

    @functools.wraps(parse)
    def serialized_parse(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)

    ast.parse = serialized_parse


if AST_PARSE_RACES:
    serialize_ast_parse()

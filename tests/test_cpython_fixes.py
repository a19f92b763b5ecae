"""The engine parses Python in threads; the CPython builds it supports must let it."""

import ast
import gc
import threading
from pathlib import Path

import engine  # noqa: F401  (installs the workarounds)


def test_threads_parsing_at_once_with_collections_between_never_fail():
    """gh-106905: on 3.11.7 this fails within a few parses unless ast.parse is serialized."""
    source = Path(ast.__file__).read_text()
    errors: list[BaseException] = []

    def parse():
        try:
            for _ in range(5):
                ast.parse(source)
        except SystemError as exc:
            errors.append(exc)

    def churn(phase, info):  # a collection that runs Python code lets another thread in
        [str(i) for i in range(200)]

    gc.callbacks.append(churn)
    try:
        threads = [threading.Thread(target=parse) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.callbacks.remove(churn)
    assert errors == []

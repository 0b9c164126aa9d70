"""Fixtures of the contract suite: every backend kind x every checkpoint storage."""

from __future__ import annotations

import pytest

from sparkpoint.state.heap import clear_heap_cache

from .harness import BACKENDS, STORAGES, Harness


@pytest.fixture(params=[(b, s) for b in BACKENDS for s in STORAGES], ids=lambda p: f"{p[0]}-{p[1]}")
def harness(request, tmp_path):
    """A harness for one backend kind and one storage."""
    backend, storage = request.param
    h = Harness(backend, storage, str(tmp_path))
    yield h
    h.close_all()
    clear_heap_cache()


@pytest.fixture(params=STORAGES)
def storage(request) -> str:
    """Each checkpoint storage."""
    return request.param

"""A worker's garbage collector: start-up objects frozen out of collection, young collections rarer, and cyclic
garbage still freed."""

from __future__ import annotations

import gc
import weakref

import pytest

from audit.runtime import collection


@pytest.fixture
def restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_tune_freezes_what_exists_and_collects_young_objects_less_often(restored):
    older = gc.get_threshold()[1:]
    collection.tune()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (collection.YOUNG, *older)


def test_cyclic_garbage_made_after_tuning_is_still_collected(restored):
    class Node:
        pass

    collection.tune()
    node = Node()
    node.self = node  # a cycle: reference counting alone never frees it
    gone = weakref.ref(node)
    del node
    kept = [[] for _ in range(2 * collection.YOUNG)]  # net allocations enough for a young collection to run
    assert gone() is None and kept

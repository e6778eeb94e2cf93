"""The exported names of ``switchyard.agents.workflows``."""

from __future__ import annotations

import switchyard.agents.workflows as workflows


def test_all_names_exist_and_are_sorted() -> None:
    exported = workflows.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert getattr(workflows, name) is not None


def test_the_spec_the_language_and_the_machine_are_exported() -> None:
    for name in ("WorkflowSpec", "parse", "render", "Scope", "start", "advance", "record_output", "RunAgent"):
        assert name in workflows.__all__

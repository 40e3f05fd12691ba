"""The suite's own rule: every test says where its expected value comes from (tests/README.md)."""

from __future__ import annotations

from tools.test_sources import INDEPENDENT, KINDS, collect, independent_share, missing


def test_every_test_function_declares_its_source():
    """Source: contract: each test function's docstring has a `Source: <kind>` line with a known kind,
    so a test added without one fails here (tools/test_sources.py --missing lists them)."""
    sources = collect()
    assert len(sources) > 100
    bad = [f"{s.file}:{s.line} {s.name} ({s.kind or 'no Source: line'})" for s in missing(sources)]
    assert not bad, "declare `Source: <kind>` (one of " + ", ".join(KINDS) + ") in:\n" + "\n".join(bad)


def test_the_counter_reads_the_convention(tmp_path):
    """Source: hand: a two-test file, one seed and one invariant, counts one of two independent."""
    f = tmp_path / "test_x.py"
    f.write_text('def test_a():\n    """What.\n\n    Source: seed: item 1."""\n\n\n'
                 'def test_b():\n    """Source: invariant"""\n\n\ndef helper():\n    pass\n')
    sources = collect([f])
    assert [(s.name, s.kind, s.detail) for s in sources] == [
        ("test_a", "seed", "item 1."), ("test_b", "invariant", ""),
    ]
    assert independent_share(sources) == 0.5
    assert "seed" in INDEPENDENT and "invariant" not in INDEPENDENT

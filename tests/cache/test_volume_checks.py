"""The volume checks of tests/cache/conftest.py (``@pytest.mark.volume(name, check)``), run in
a pytest session of their own (pytester) on a toy volume: four cases record themselves in a
ledger, the check wants ``TARGET`` of them. The check runs after every case, fails when the
volume is short or a case failed, and never passes vacuously: cases deselected by ``-k`` or
node ids make it skip and say so in the terminal summary; cases deselected otherwise make it
fail."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py").read_text()

TOY = """
import pytest

LEDGER = []
TARGET = {target}


def check():
    assert len(LEDGER) >= TARGET, f"{{len(LEDGER)}} cases recorded, want >= {{TARGET}}"
    return f"{{len(LEDGER)}} recorded"


@pytest.mark.volume("toy", check)
@pytest.mark.parametrize("i", {cases})
def test_case(i):
    assert i != {fail}
    LEDGER.append(i)
"""


def _session(
    pytester: pytest.Pytester, *args: str, target: int = 4, fail: int = -1, cases: str = "range(4)"
) -> pytest.RunResult:
    pytester.makeini(
        "[pytest]\nmarkers =\n    volume: v\n    later: l\naddopts = -ra -p no:cacheprovider\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_toy=TOY.format(target=target, fail=fail, cases=cases))
    # Collected after test_toy.py: the check still runs last, after every test of the session.
    pytester.makepyfile(test_zz_other="def test_other():\n    pass\n")
    # No assertion rewriting of the conftest, no hypothesis plugin: ~5 s less per session.
    return pytester.runpytest_inprocess("-v", "-p", "no:hypothesispytest", "--assert=plain", *args)


def test_full_volume_passes_after_every_case(pytester: pytest.Pytester) -> None:
    result = _session(pytester)
    result.assert_outcomes(passed=6)
    lines = [ln for ln in result.outlines if "PASSED" in ln]
    assert lines[-1].startswith("test_toy.py::volume[toy] PASSED"), lines
    result.stdout.fnmatch_lines(["*- volume checks -*", "toy: 4 cases, 4 recorded"])


def test_short_volume_fails(pytester: pytest.Pytester) -> None:
    result = _session(pytester, target=5)
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        ["FAILED test_toy.py::volume?toy? - toy: 4 cases recorded, want >= 5"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_failed_case_fails_the_volume(pytester: pytest.Pytester) -> None:
    result = _session(pytester, fail=2)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["toy: 1 failed of its 4 cases: the volume is short"])


@pytest.mark.parametrize(
    "args", [("-k", "not case[3]"), ("test_toy.py::test_case[0]",)], ids=["-k", "node-id"]
)
def test_user_deselection_skips_and_says_so(pytester: pytest.Pytester, args) -> None:
    result = _session(pytester, *args)
    result.stdout.fnmatch_lines(
        ["*- volume checks -*", "toy: * of 4 cases selected (*): volume NOT checked"]
    )
    result.stdout.fnmatch_lines(["SKIPPED*volume not checked: toy: * of 4 cases selected*"])
    assert result.parseoutcomes()["skipped"] == 1
    assert result.ret == pytest.ExitCode.OK


def test_cases_deselected_by_a_marker_fail_the_volume(pytester: pytest.Pytester) -> None:
    """A marker on part of the cases (here ``later`` on case 3) and ``-m "not later"``: the
    default test command would pass without the volume."""
    cases = "[0, 1, 2, pytest.param(3, marks=pytest.mark.later)]"
    result = _session(pytester, "-m", "not later", target=3, cases=cases)
    result.assert_outcomes(passed=4, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*toy: 3 of 4 cases selected, deselected by neither -k*"])


def test_no_selected_case_no_check(pytester: pytest.Pytester) -> None:
    result = _session(pytester, "-k", "other")
    result.assert_outcomes(passed=1, deselected=4)
    assert "volume" not in result.stdout.str()


def test_a_check_moved_before_its_cases_fails(pytester: pytest.Pytester) -> None:
    """A plugin that reorders the tests after the check item was added at the end: the check
    does not pass on an empty ledger."""
    pytester.makepyfile(
        reorder="""
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items):
    yield
    items.sort(key=lambda item: not item.name.startswith("volume"))
"""
    )
    pytester.syspathinsert()
    result = _session(pytester, "-p", "reorder")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["toy: checked before 4 of its 4 cases ran*"])

"""Progress lines (`ember.progress`): quiet for short work, the phases of long work."""

from __future__ import annotations

import re
import time

import pytest

from ember.progress import Phases


def lines(text: str) -> list[str]:
    return [re.sub(r"\(\d+\.\d s\)", "(t)", line) for line in text.splitlines()]


def test_short_work_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    phases = Phases("capture", shown=True, after=60)
    phases("reading the plan")
    phases("the job")
    phases.done("lineage ready")
    assert capsys.readouterr().err == ""


def test_long_work_names_the_phase_under_way_then_each_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    phases = Phases("capture", shown=True, after=0.05)
    phases("reading the plan")
    phases("the job")
    time.sleep(0.3)  # the quiet ends during the job
    phases("side tables (2)")
    phases.done("lineage ready")
    assert lines(capsys.readouterr().err) == [
        "ember: capture: the job (t)",
        "ember: capture: side tables (2) (t)",
        "ember: capture: lineage ready (t)",
    ]


def test_not_shown_when_not_asked(capsys: pytest.CaptureFixture[str]) -> None:
    phases = Phases("capture", shown=False, after=0)
    phases("the job")
    time.sleep(0.1)
    phases.done()
    assert capsys.readouterr().err == ""

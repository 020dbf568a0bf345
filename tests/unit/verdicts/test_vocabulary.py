"""One verdict vocabulary: a word means one thing in can-run, doctor and smoke."""

from __future__ import annotations

from archwheel.exit_codes import ExitCode
from archwheel.verdicts.vocabulary import OBSERVED, SmokeVerdict, StepVerdict, Verdict


def test_a_word_shared_by_prediction_and_observation_is_the_same_word() -> None:
    predicted = {v.value for v in Verdict}
    for word in {s.value for s in StepVerdict} | {s.value for s in SmokeVerdict}:
        if word in predicted:
            assert word in {"native", "no-kernel-image"}, word
    assert StepVerdict.NATIVE.value == Verdict.NATIVE.value
    assert StepVerdict.NO_KERNEL_IMAGE.value == SmokeVerdict.NO_KERNEL_IMAGE.value


def test_every_kernel_path_prediction_has_its_observation() -> None:
    paths = {Verdict.NATIVE, Verdict.JIT, Verdict.NO_KERNEL_IMAGE}
    assert set(OBSERVED) == paths
    assert OBSERVED[Verdict.JIT] is StepVerdict.JIT_ONLY
    # a whole smoke run reports the same words its steps do
    assert SmokeVerdict(OBSERVED[Verdict.JIT].value) is SmokeVerdict.JIT_ONLY
    assert SmokeVerdict(OBSERVED[Verdict.NO_KERNEL_IMAGE].value) is SmokeVerdict.NO_KERNEL_IMAGE


def test_verdict_exit_codes_come_from_the_one_table() -> None:
    assert {v.exit_code for v in Verdict} == {
        ExitCode.OK,
        ExitCode.SOME_JIT,
        ExitCode.DRIVER_TOO_OLD,
        ExitCode.NO_KERNEL_IMAGE,
    }
    assert max(Verdict, key=lambda v: v.severity) is Verdict.NO_KERNEL_IMAGE

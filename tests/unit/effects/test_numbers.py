"""Every number a user writes (a setting, an option, ``COLUMNS``) is ASCII digits, read by one
of two helpers (``text.whole_number``, ``text.decimal_number``): Python's ``int()`` and
``float()`` also take a full-width or Arabic-Indic digit, ``1_000``, white space around, nan
and inf, which no other program reading the same text takes."""

from __future__ import annotations

import argparse

import pytest

from archwheel.crosscheck.cuobjdump import timeout_setting
from archwheel.effects.deadline import NetLimits
from archwheel.effects.process import parse_timeout
from archwheel.errors import UsageError
from archwheel.interfaces.commands.options import non_negative_int, positive_number, whole_number
from archwheel.interfaces.render.common import PIPED_COLUMNS, piped_width
from archwheel.text import MAX_NUMBER_CHARS, decimal_number
from archwheel.text import whole_number as parse_whole

NOT_ASCII = ["\uff15", "\u0663", "\u0967", "1_000", "1_0", "\u00b2", "\uff11\uff10", "5\u200b"]
NOT_NUMBERS = ["", " ", "0x10", "1e", ".", "+", "nan", "inf", "-inf", "Infinity", "1,5", "5s"]


@pytest.mark.parametrize("text", NOT_ASCII + NOT_NUMBERS + [" 5", "5 ", "5\n"])
def test_the_helpers_take_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError, match="ASCII digits") as caught:
        decimal_number(text)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="ASCII digits"):
        parse_whole(text)


def test_the_helpers_read_what_they_should() -> None:
    assert [decimal_number(t) for t in ("5", "0.5", ".5", "5.", "1e3", "+2", "-1")] == [
        5.0, 0.5, 0.5, 5.0, 1000.0, 2.0, -1.0,
    ]  # fmt: skip
    assert [parse_whole(t) for t in ("0", "007", "+3", "-4")] == [0, 7, 3, -4]
    with pytest.raises(ValueError):
        parse_whole("3.0")
    with pytest.raises(ValueError):  # thousands of digits: refused before int() is asked
        parse_whole("9" * 5000)
    with pytest.raises(ValueError):
        decimal_number("1" * (MAX_NUMBER_CHARS + 1))


@pytest.mark.parametrize("text", NOT_ASCII)
def test_every_numeric_setting_refuses_unicode_digits_and_underscores(text: str) -> None:
    with pytest.raises(ValueError, match="ARCHWHEEL_NET_TIMEOUT"):
        NetLimits.from_settings(text, "")
    with pytest.raises(ValueError, match="ARCHWHEEL_NET_RUN_TIMEOUT"):
        NetLimits.from_settings("", text)
    with pytest.raises(UsageError, match="ARCHWHEEL_CUOBJDUMP_TIMEOUT"):
        timeout_setting(text)
    with pytest.raises(ValueError):
        parse_timeout(text)


@pytest.mark.parametrize("text", NOT_ASCII)
def test_every_numeric_option_refuses_unicode_digits_and_underscores(text: str) -> None:
    for option_type in (positive_number, whole_number, non_negative_int):
        with pytest.raises(argparse.ArgumentTypeError):
            option_type(text)


def test_the_settings_still_take_plain_numbers() -> None:
    assert NetLimits.from_settings(" 5 ", "1e3") == NetLimits(5.0, 1000.0)
    assert timeout_setting("2.5") == 2.5
    assert whole_number("8") == 8 and non_negative_int("0") == 0


@pytest.mark.parametrize(
    ("text", "width"),
    [("100", 100), (" 90 ", 90), ("", PIPED_COLUMNS), ("abc", PIPED_COLUMNS),
     ("\uff11\uff12\uff10", PIPED_COLUMNS), ("1_000", PIPED_COLUMNS), ("0", PIPED_COLUMNS),
     ("99999999999", PIPED_COLUMNS), ("9" * 5000, PIPED_COLUMNS)],
)  # fmt: skip
def test_columns_of_piped_output_are_read_or_the_default(text: str, width: int) -> None:
    assert piped_width(text) == width

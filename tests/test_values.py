"""dsbench.records.values: typed values out of parsed JSON/TOML, one-line errors with the key
path."""

import math

import pytest

from dsbench.records import values


class Bad(Exception):
    pass


def _fail(path: str, problem: str) -> Bad:
    return Bad(f"{path} {problem}" if path else problem)


JSON = values.Reader(_fail, json=True)
TOML = values.Reader(lambda path, problem: Bad(f"field '{path}': {problem}"))


def _error(check, *args, **kwargs) -> str:
    with pytest.raises(Bad) as info:
        check(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "true"), ("x", '"x"'), ([1, 2], "[1, 2]"), ("a" * 50, '"' + "a" * 36 + "...")],
)
def test_show_json(value, shown):
    assert values.show_json(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "true"), ("x", "'x'"), ({}, "a table"), ([1], "a list"), (2.5, "2.5")],
)
def test_show_toml(value, shown):
    assert values.show_toml(value) == shown


@pytest.mark.parametrize(
    ("value", "ok"),
    [(1, True), (2.5, True), (True, False), ("1", False), (math.nan, False), (math.inf, False),
     (10**400, False), (None, False)],
)  # fmt: skip
def test_is_number(value, ok):
    assert values.is_number(value) is ok


def test_closest_names_the_nearest_valid_key():
    assert values.closest("enable", ["enabled", "loss_scale"]) == " (did you mean 'enabled'?)"
    assert values.closest("zzz", ["enabled"]) == ""


def test_json_wording_names_path_value_and_kind():
    assert _error(JSON.boolean, "fp16.enabled", 1) == (
        "fp16.enabled must be true or false, got 1 (a number)"
    )
    assert _error(JSON.integer, "n", "8") == 'n must be an integer, got "8" (a string)'
    assert _error(JSON.integer, "n", 8.5) == "n must be a whole number, got 8.5"
    assert _error(JSON.integer, "n", 0, 1) == "n must be ≥ 1, got 0"
    assert _error(JSON.integer, "n", -1) == "n must not be negative, got -1"
    assert _error(JSON.integer, "n", 2**63) == f"n must be below 2**63, got {2**63}"
    assert _error(JSON.number, "x", math.inf) == "x must be finite, got inf"
    assert _error(JSON.number, "x", -0.5, 0) == "x must not be negative, got -0.5"
    assert _error(JSON.number, "x", 10**400).startswith("x is too large, got ")
    assert _error(JSON.known, {"enable": 1}, ["enabled"], "bf16.") == (
        "unknown key bf16.enable (did you mean 'enabled'?)"
    )


def test_toml_wording_names_path_and_value():
    assert (
        _error(TOML.boolean, "detect", "yes") == "field 'detect': expected true or false, got 'yes'"
    )
    assert _error(TOML.string, "vendor", "intel", ("amd", "nvidia")) == (
        "field 'vendor': expected one of amd, nvidia, got 'intel'"
    )
    assert (
        _error(TOML.string, "name", "  ") == "field 'name': expected a non-empty string, got '  '"
    )
    assert _error(TOML.table, "t", [1]) == "field 't': expected a table, got a list"
    assert (
        _error(TOML.strings, "p", ["a", 1]) == "field 'p': expected a list of strings, got a list"
    )
    assert _error(TOML.positive, "r", 0) == "field 'r': expected a positive number, got 0"
    assert _error(TOML.known, {"units": 1}, ["unit", "label"], "claims[0].") == (
        "field 'claims[0].units': unknown field (did you mean 'unit'?); valid: unit, label"
    )


def test_pair_checks_order_and_sign():
    assert TOML.pair("r", [0, 2], "[low, high]") == (0.0, 2.0)
    assert TOML.pair("r", [1, 1], "[low, high]") == (1.0, 1.0)
    assert _error(TOML.pair, "r", [1, 1], "[low, high]", strict=True) == (
        "field 'r': expected [low, high], got a list"
    )
    for bad in ([-1, 2], [2, 1], [1], [1, "2"], "1, 2"):
        _error(TOML.pair, "r", bad, "[low, high]")


def test_good_values_come_back_in_their_python_type():
    assert JSON.integer("n", 5e8) == 500_000_000 and isinstance(JSON.integer("n", 5e8), int)
    assert JSON.number("x", 3) == 3.0 and isinstance(JSON.number("x", 3), float)
    assert JSON.boolean("b", False) is False
    assert TOML.string("s", "a", ("a", "b")) == "a"
    assert TOML.positive("r", 2) == 2.0


@pytest.mark.parametrize(
    ("text", "problem"),
    [("a = ", "not valid TOML: "), ("a = 1" + "0" * 5000, "not valid TOML: a number too long"),
     (b"\xff", "cannot read: ")],
)  # fmt: skip
def test_read_toml_problems_are_one_line_naming_the_file(tmp_path, text, problem):
    path = tmp_path / "x.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(Bad) as info:
        values.read_toml(path, "files/x.toml", Bad)
    assert str(info.value).startswith(f"files/x.toml: {problem}")
    assert "\n" not in str(info.value)


def test_read_toml_reads_a_document(tmp_path):
    (tmp_path / "ok.toml").write_text('a = 1\n[t]\nb = "x"\n')
    assert values.read_toml(tmp_path / "ok.toml", "ok", Bad) == {"a": 1, "t": {"b": "x"}}

"""Workflow expressions and templates: the language's semantics, its type errors, and its bounds against hostile
tenants (sizes, nesting, growth, no reach into Python)."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.agents.workflows import (
    MAX_EXPRESSION_NODES,
    MAX_VALUE_SIZE,
    MAX_WORK_UNITS,
    ExpressionError,
    Scope,
    WorkBudget,
    parse,
    parse_template,
    render,
    truthy,
)

SCOPE = Scope(
    state={"count": 3, "name": "Ada", "tags": ["urgent", "billing"], "order": {"id": 7, "items": [{"sku": "x"}]}},
    input="Refund my order",
    last_output='{"category": "billing", "score": 0.9}',
)


def value(text: str, scope: Scope = SCOPE) -> Any:
    return parse(text).evaluate(scope)


def error(text: str, scope: Scope = SCOPE) -> str:
    with pytest.raises(ExpressionError) as caught:
        value(text, scope)
    return str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("-2 * 3", -6),
        ("- -2", 2),
        ("7 / 2", 3.5),
        ("7 % 3", 1),
        ("1 + 2 == 3", True),
        ("1 < 2 and 3 < 2 or true", True),
        ("not 1 == 2", True),
        ("not false and false", False),
        ("true or 1 / 0", True),  # short-circuit: the right side is never evaluated
        ("false and 1 / 0", False),
        ("null or 'fallback'", "fallback"),
        ("state.count or 5", 3),
    ],
)
def test_operators_follow_the_usual_precedence(text: str, expected: Any) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", 42),
        ("1.5", 1.5),
        ("2e3", 2000.0),
        ("'single'", "single"),
        ('"double"', "double"),
        (r'"say \"hi\" \\ bye"', 'say "hi" \\ bye'),
        (r"'it\'s'", "it's"),
        (r"'a\nb\tc'", "a\nb\tc"),
        ("true", True),
        ("false", False),
        ("null", None),
        ("[1, 'a', [true], null]", [1, "a", [True], None]),
        ("[]", []),
    ],
)
def test_literals(text: str, expected: Any) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 == 1.0", True),
        ("1 == true", False),
        ("0 == false", False),
        ("null == null", True),
        ("[1, json('{\"a\": 2}')] == [1.0, json('{\"a\": 2.0}')]", True),
        ("[1] == [true]", False),
        ("'a' != 'b'", True),
        ("2 <= 2", True),
        ("3 > 2.5", True),
        ("'apple' < 'banana'", True),
        ("'b' >= 'a'", True),
        ("'fund' in input", True),
        ("'urgent' in state.tags", True),
        ("'id' in state.order", True),
        ("'nope' not in state.tags", True),
        ("1 in [true]", False),
        ("'x' in state.missing", False),
        ("'ab' + 'cd'", "abcd"),
        ("[1] + [2, 3]", [1, 2, 3]),
    ],
)
def test_comparison_membership_and_concatenation(text: str, expected: Any) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state.count", 3),
        ("state.order.id", 7),
        ("state.order.items[0].sku", "x"),
        ("state.order['items'][0]['sku']", "x"),
        ("state.tags[-1]", "billing"),
        ("input", "Refund my order"),
        ("last_output", '{"category": "billing", "score": 0.9}'),
        ("output.category", "billing"),
        ("output['score']", 0.9),
        ("input[0]", "R"),
    ],
)
def test_names_member_access_and_indexing(text: str, expected: Any) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "state.missing",
        "state.missing.deeper[3]",
        "state.tags[5]",
        "state.tags[-9]",
        "state.tags['k']",
        "state.order[0]",
        "state.count.anything",
        "state.tags[true]",
        "output.nothing",
    ],
)
def test_missing_keys_and_indices_are_null(text: str) -> None:
    assert value(text) is None


def test_output_is_null_when_the_last_answer_is_not_json() -> None:
    assert value("output", Scope(state={}, input="", last_output="plain words")) is None
    assert value("output", Scope(state={}, input="", last_output=None)) is None
    assert value("output", Scope(state={}, input="", last_output="NaN")) is None
    assert value("last_output", Scope(state={}, input="")) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("len('abc')", 3),
        ("len(state.tags)", 2),
        ("len(state.order)", 2),
        ("len(state.missing)", 0),
        ("lower('AbC')", "abc"),
        ("upper('AbC')", "ABC"),
        ("contains(input, 'order')", True),
        ("contains(state.tags, 'x')", False),
        ("contains(state.order, 'id')", True),
        ("startswith(input, 'Ref')", True),
        ("endswith(input, 'Ref')", False),
        ("number('12')", 12),
        ("number(' -1.5 ')", -1.5),
        ("number('twelve')", None),
        ("number(4)", 4),
        ("number(true)", None),
        ("string(12)", "12"),
        ("string(true)", "true"),
        ("string(null)", ""),
        ("string([1, 'a'])", '[1, "a"]'),
        ("string('as is')", "as is"),
        ("json('{\"a\": [1, 2]}').a[1]", 2),
        ("json('not json')", None),
        ("json('NaN')", None),
        ("json(null)", None),
    ],
)
def test_functions(text: str, expected: Any) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("'a' < 1", "cannot apply < to string and number"),
        ("'a' + 1", "cannot apply + to string and number"),
        ("[1] + 'a'", "cannot apply + to list and string"),
        ("'ab' * 3", "cannot apply * to string and number"),
        ("true + 1", "cannot apply + to boolean and number"),
        ("state.tags - 1", "cannot apply - to list and number"),
        ("1 in 5", "cannot apply in to number and number"),
        ("-'a'", "unary - needs a number, got string"),
        ("1 / 0", "division by zero (/)"),
        ("5 % 0", "division by zero (%)"),
        ("1.5 / 0.0", "division by zero (/)"),
        ("lower(1)", "lower(): needs a string, got number"),
        ("len(5)", "len(): needs a string, list or object, got number"),
        ("contains(5, 'a')", "contains(): cannot apply contains to string and number"),
    ],
)
def test_type_errors_and_division_by_zero_name_the_operator_and_types(text: str, message: str) -> None:
    assert message in error(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2 ** 3", "there is no ** operator"),
        ("1 = 1", "use == to compare"),
        ("a && b", "use and"),
        ("!true", "use not"),
        ("1 < 2 < 3", "comparisons do not chain"),
        ("foo", "unknown name 'foo'"),
        ("__import__('os')", "unknown function '__import__'"),
        ("state.__class__.__mro__()", "unexpected '('"),
        ("len(1, 2)", "len() takes 1 argument(s), got 2"),
        ("'open", "unterminated string"),
        (r"'\x'", "unknown escape"),
        ("(1 + 2", "expected ')'"),
        ("1 +", "expected a value"),
        ("state.", "expected a key name after '.'"),
        ("1 2", "unexpected 2"),
        ("@", "unexpected character '@'"),
        ("99999999999999999999", "out of range"),
        ("", "expected a value"),
    ],
)
def test_parse_errors_say_what_is_wrong_and_where(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse(text)
    assert message in str(caught.value)


def test_parse_errors_carry_the_position() -> None:
    with pytest.raises(ExpressionError) as caught:
        parse("state.count + @")
    assert caught.value.position == 14


def test_python_internals_are_just_missing_keys() -> None:
    assert value("state.__class__") is None
    assert value("state.__dict__") is None
    assert value("input.__len__") is None
    assert value("state['__class__']") is None
    assert value("output.__globals__") is None


def test_an_expression_longer_than_2000_characters_is_refused() -> None:
    with pytest.raises(ExpressionError, match="longer than 2,000 characters"):
        parse("1 + " * 750 + "1")


def test_an_expression_with_more_than_300_nodes_is_refused() -> None:
    parse(" + ".join(["1"] * (MAX_EXPRESSION_NODES // 2)))
    with pytest.raises(ExpressionError, match="more than 300 nodes"):
        parse(" + ".join(["1"] * 200))


def test_nesting_deeper_than_50_is_refused() -> None:
    assert value("(" * 50 + "1" + ")" * 50) == 1
    with pytest.raises(ExpressionError, match="nested more than 50 deep"):
        parse("(" * 51 + "1" + ")" * 51)
    with pytest.raises(ExpressionError, match="nested more than 50 deep"):
        parse("not " * 60 + "true")
    with pytest.raises(ExpressionError, match="nested more than 50 deep"):
        parse("[" * 60 + "]" * 60)
    with pytest.raises(ExpressionError, match="nested more than 50 deep"):
        parse("len(" * 60 + "1" + ")" * 60)


def test_strings_and_lists_cannot_grow_past_the_cap() -> None:
    big = Scope(state={"s": "x" * 60_000, "items": list(range(60_000))}, input="")
    assert len(value("state.s + 'y'", big)) == 60_001
    assert "longer than 100,000 characters" in error("state.s + state.s", big)
    assert "longer than 100,000 items" in error("state.items + state.items", big)
    # doubling by repeated + stops at the cap, long before memory is at risk
    assert "longer than 100,000 characters" in error(" + ".join(["state.s"] * 20), big)
    assert "longer than 100,000 characters" in error("upper(state.s + state.s)", big)


def test_a_large_value_is_refused_before_it_is_written_out_as_text() -> None:
    big = Scope(state={"items": list(range(60_000)), "s": "x" * 60_000}, input="")
    many = "[" + ", ".join(["state.items"] * 100) + "]"  # 6 million numbers, never turned into text
    assert "longer than 100,000 characters" in error(f"string({many})", big)
    assert "longer than 100,000 characters" in error("string([state.s, state.s])", big)
    with pytest.raises(ExpressionError, match="more than 100,000 characters"):
        render({"a": "{{ state.items }}", "b": "{{ state.items }}"}, big)


def test_the_work_of_evaluations_sharing_a_budget_is_bounded() -> None:
    state = {"items": list(range(100_000)), "copy": list(range(100_000)), "s": "ab" * 50_000}
    scope = Scope(state=state, input="")
    assert value("state.items == state.copy", scope) is True
    with pytest.raises(ExpressionError, match="more than 1,000,000 units of work in one step"):
        value(" and ".join(["state.items == state.copy"] * 20), scope)
    shared = Scope(state=state, input="", budget=WorkBudget(300_000))
    parse("contains(state.s, 'x') or contains(state.s, 'y')").evaluate(shared)  # 200,000 characters searched
    with pytest.raises(ExpressionError, match="more than 300,000 units of work"):
        parse("contains(state.s, 'z') or contains(state.s, 'w')").evaluate(shared)
    assert MAX_WORK_UNITS == 1_000_000


def test_numbers_cannot_grow_without_bound() -> None:
    assert "integer result is out of range" in error("9223372036854775807 + 1")
    assert "integer result is out of range" in error(" * ".join(["4294967296"] * 3))
    assert "number result is out of range" in error("1e300 * 1e300")
    assert "out of range" in error("number('1e999')")


def test_truthiness() -> None:
    assert [truthy(v) for v in (None, False, 0, 0.0, "", [], {})] == [False] * 7
    assert [truthy(v) for v in (True, 1, -0.5, "0", [0], {"a": None})] == [True] * 6


def test_parsed_expressions_are_reusable_and_immutable() -> None:
    expression = parse("state.count + 1")
    assert expression.evaluate(SCOPE) == 4
    assert expression.evaluate(Scope(state={"count": 10}, input="")) == 11
    with pytest.raises(AttributeError):
        expression.text = "1"  # type: ignore[misc]


# -- templates ---------------------------------------------------------------------------------------------------


def test_a_whole_value_placeholder_keeps_the_value_type() -> None:
    template = {"tags": "{{ state.tags }}", "count": "{{state.count}}", "nothing": "{{ state.missing }}"}
    assert render(template, SCOPE) == {"tags": ["urgent", "billing"], "count": 3, "nothing": None}


def test_embedded_placeholders_become_text() -> None:
    rendered = render(
        {"summary": "{{ state.name }} has {{ state.count }} items: {{ state.tags }}{{ state.missing }}"}, SCOPE
    )
    assert rendered == {"summary": 'Ada has 3 items: ["urgent", "billing"]'}


def test_templates_render_recursively_and_leave_keys_and_other_values() -> None:
    template = {"{{ keys }}": [1, True, None, {"deep": ["{{ upper(state.name) }}"]}], "plain": "no placeholders"}
    assert render(template, SCOPE) == {
        "{{ keys }}": [1, True, None, {"deep": ["ADA"]}],
        "plain": "no placeholders",
    }


def test_a_placeholder_ends_at_the_first_closing_braces_outside_a_string() -> None:
    assert render("{{ '}}' }} and {{ \"{{\" }}", SCOPE) == "}} and {{"


def test_template_output_is_capped() -> None:
    big = Scope(state={"s": "x" * 60_000}, input="")
    assert render("{{ state.s }}", big) == "x" * 60_000
    with pytest.raises(ExpressionError, match="more than 100,000 characters"):
        render("{{ state.s }} {{ state.s }}", big)
    with pytest.raises(ExpressionError, match="more than 100,000 characters"):
        render(["{{ state.s }}", "{{ state.s }}"], big)
    assert MAX_VALUE_SIZE == 100_000


def test_parse_template_checks_every_placeholder() -> None:
    parse_template({"a": ["{{ state.x }} and {{ len(input) }}"], "b": 3})
    with pytest.raises(ExpressionError, match=r"placeholder '\{\{ 1 \+ \}\}'"):
        parse_template({"a": ["ok", "{{ 1 + }}"]})
    with pytest.raises(ExpressionError, match=r"unclosed \{\{"):
        parse_template("hello {{ state.x")
    nested: Any = "x"
    for _ in range(40):
        nested = [nested]
    with pytest.raises(ExpressionError, match="nested more than 32 deep"):
        parse_template(nested)
    with pytest.raises(ExpressionError, match="more than 1,000 JSON values"):
        parse_template(list(range(2_000)))
    with pytest.raises(ExpressionError, match="more than 100,000 characters in its strings"):
        parse_template({"a": "x" * 60_000, "b": "y" * 60_000})

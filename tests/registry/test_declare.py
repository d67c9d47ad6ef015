"""Tool, ToolDef, Access and tool ids: frozen values and the id rule of `tool_id`."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rastrillo.registry.declare import (
    Access,
    Arg,
    ArgMap,
    Tool,
    ToolDef,
    ToolRead,
    ToolWrite,
    arg_problems,
    checked_tool_def,
    tool_id,
)
from rastrillo.registry.schemas import WRITE_SUFFIX, schemas


def make_def(**changes: object) -> ToolDef:
    fields: dict[str, object] = {
        "id": "orders_id_cancel_post",
        "method": "POST",
        "path": "/orders/{id}/cancel",
        "description": "Cancel one order.",
        "access": ToolWrite,
        "args": {"id": "the order id", "reason": "why"},
        "confirm": "Cancel order {id}?",
        "source": "actions/orders/[id]/cancel.POST.py",
    }
    return ToolDef(**{**fields, **changes})  # type: ignore[arg-type]


def test_access_members_and_aliases() -> None:
    assert [a.value for a in Access] == ["read", "write"]
    assert ToolRead is Access.READ and ToolWrite is Access.WRITE
    assert str(ToolWrite) == "write"


@pytest.mark.parametrize("cls", [Tool, ToolDef])
def test_access_given_as_a_string_becomes_the_member(cls: type) -> None:
    # Checks compare with `is`; a bare "write" must never pass for a read.
    made = Tool(description="x", access="write") if cls is Tool else make_def(access="write")
    assert made.access is ToolWrite
    assert schemas([make_def(access="write")])[0]["description"].endswith(WRITE_SUFFIX)


@pytest.mark.parametrize("access", ["WRITE", "admin", "", None, True, 1])
def test_an_unknown_access_is_refused_at_construction(access: object) -> None:
    with pytest.raises(ValueError, match=r"access must be rastrillo\.ToolRead or"):
        make_def(access=access)
    with pytest.raises(ValueError, match="access must be"):
        Tool(description="x", access=access)  # type: ignore[arg-type]


def test_tool_defaults_to_a_read_tool_without_args_or_confirm() -> None:
    tool = Tool(description="List events.")
    assert tool.access is ToolRead
    assert tool.args == {} and tool.confirm == ""


def test_tool_takes_keywords_only() -> None:
    with pytest.raises(TypeError):
        Tool("List events.")  # type: ignore[misc]


@pytest.mark.parametrize("cls", [Tool, ToolDef])
def test_frozen(cls: type) -> None:
    value = Tool(description="x") if cls is Tool else make_def()
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.description = "y"  # type: ignore[misc]


def test_args_are_stored_immutably_and_sorted() -> None:
    source = {"reason": "why", "id": "the order id"}
    defn = make_def(args=source)
    source["extra"] = "changed after construction"
    assert isinstance(defn.args, ArgMap)
    assert list(defn.args) == ["id", "reason"]
    assert dict(defn.args) == {"id": Arg("the order id"), "reason": Arg("why")}
    assert defn.args == {"id": "the order id", "reason": "why"}  # a plain string is Arg(it)
    with pytest.raises(TypeError):
        defn.args["id"] = "x"  # type: ignore[index]


def test_compared_and_hashed_by_value() -> None:
    a = make_def(args={"id": "the order id", "reason": "why"})
    b = make_def(args={"reason": "why", "id": "the order id"})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != make_def(source="actions/other.POST.py")
    assert a != make_def(args={"id": "the order id"})
    assert Tool(description="x", args={"a": "1"}) == Tool(description="x", args={"a": "1"})
    assert hash(Tool(description="x")) == hash(Tool(description="x"))


def test_argmap_behaves_like_a_read_only_dict() -> None:
    args = ArgMap({"b": "2", "a": "1"})
    assert args == {"a": "1", "b": "2"} and args != {"a": "1"}
    assert args == {"a": Arg("1"), "b": "2"} and args != {"a": "1", "b": Arg("2", type=int)}
    assert repr(args) == "{'a': Arg('1'), 'b': Arg('2')}"
    assert args.get("c") is None and len(args) == 2
    assert ArgMap(args) == args and ArgMap() == {}


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/orders/{id}/cancel", "orders_id_cancel_post"),
        ("GET", "/orders/{id}", "orders_id_get"),
        ("GET", "/orders/{id}/edit", "orders_id_edit_get"),
        ("GET", "/orders", "orders_get"),
        ("GET", "/", "get"),
        ("POST", "/admin/notes/{id}/edit-basics", "admin_notes_id_edit_basics_post"),
        ("POST", "/2fa/verify", "a_2fa_verify_post"),
        ("PATCH", "/Users/{userId}", "users_userid_patch"),
        ("DELETE", "/a--b//c", "a_b_c_delete"),
        ("GET", "/café/menü", "caf_men_get"),
        ("", "/", "a_"),
        ("", "", "a_"),
        ("", "/9", "a_9"),
    ],
)
def test_tool_id(method: str, path: str, expected: str) -> None:
    assert tool_id(method, path) == expected


@given(st.sampled_from(["GET", "POST", ""]), st.text())
def test_tool_id_turns_each_run_of_other_characters_into_one_underscore(
    method: str, path: str
) -> None:
    """The rule as one regular expression, for `tool_id`'s joined runs to be held to."""
    ident = re.sub(r"[^A-Za-z0-9]+", "_", f"{path}_{method}").strip("_").lower()
    if not ident or ident[0].isdigit():
        ident = "a_" + ident
    assert tool_id(method, path) == ident


def test_distinct_routes_can_share_an_id() -> None:
    """Why generate checks ids for duplicates: the rule is lossy."""
    assert tool_id("POST", "/a-b") == tool_id("POST", "/a_b")
    assert tool_id("GET", "/orders/{id}") == tool_id("GET", "/orders/id")


@given(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]), st.text())
def test_tool_id_is_always_a_portable_name(method: str, path: str) -> None:
    ident = tool_id(method, path)
    assert re.fullmatch(r"[a-z][a-z0-9_]*", ident)
    assert "__" not in ident
    assert tool_id(method, path) == ident


# --- Arg: typed, optional and constrained args --------------------------------------


def test_a_plain_description_is_a_required_string() -> None:
    arg = Arg("the order id")
    assert (arg.type, arg.required, arg.choices) == (str, True, None)
    assert arg.plain and arg.declared() == [] and arg.constraints == ()
    assert not Arg("x", required=False).plain


def test_a_description_in_args_is_that_arg_with_its_own_schema_cache() -> None:
    first, second = ArgMap({"a": "one", "b": "two"}).values()
    assert first == Arg("one") and repr(first) == repr(Arg("one")) and first.plain
    assert vars(first).keys() == vars(Arg("one")).keys()
    assert first.rendered is not second.rendered and first.rendered == {}
    with pytest.raises(ValueError, match="description must be a string"):
        ArgMap({"a": 5})  # type: ignore[dict-item]


def test_arg_takes_its_description_then_keywords_only() -> None:
    with pytest.raises(TypeError):
        Arg("how many", int)  # type: ignore[misc]
    arg = Arg("how many tickets", type=int, minimum=1, maximum=10)
    assert repr(arg) == "Arg('how many tickets', type=int, minimum=1, maximum=10)"
    assert arg.declared() == [("type", int), ("minimum", 1), ("maximum", 10)]
    assert arg.constraints == (("minimum", 1), ("maximum", 10))


def test_arg_choices_are_kept_as_a_tuple_and_hashable() -> None:
    a = Arg("seat", choices=["aisle", "window"], required=False)
    b = Arg("seat", choices=("aisle", "window"), required=False)
    assert a == b and hash(a) == hash(b) and a.choices == ("aisle", "window")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.required = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"type": list}, "type must be str, int, float or bool, not list"),
        ({"type": "int"}, "type must be str, int, float or bool"),
        ({"required": "no"}, "required must be True or False"),
        ({"choices": []}, "choices must be a non-empty list"),
        ({"choices": "ab"}, "choices must be a non-empty list"),
        ({"choices": ["a", "a"]}, "choice 'a' is repeated"),
        ({"choices": ["a", "b\u202e"]}, "holds the character U+202E, which no value may hold"),
        ({"type": int, "choices": [1, "2"]}, "choices must all be int: '2' is not"),
        ({"type": int, "choices": [1, True]}, "choices must all be int: True is not"),
        ({"type": float, "choices": [1.0, 1]}, "choice 1 is repeated"),
        ({"type": float, "choices": [float("nan")]}, "choices must all be float"),
        ({"minimum": 1}, "minimum applies to an int or float arg, not str"),
        ({"type": bool, "maximum": 1}, "maximum applies to an int or float arg, not bool"),
        ({"type": int, "minimum": 1.5}, "minimum must be a finite int"),
        ({"type": float, "maximum": float("inf")}, "maximum must be a finite float"),
        ({"type": int, "minimum": 10, "maximum": 1}, "minimum 10 is greater than maximum 1"),
        ({"type": int, "max_length": 3}, "max_length applies to a str arg, not int"),
        ({"min_length": -1}, "min_length must be a whole number, 0 or more"),
        ({"min_length": 5, "max_length": 2}, "min_length 5 is greater than max_length 2"),
        ({"type": float, "pattern": "x"}, "pattern applies to a str arg, not float"),
        ({"pattern": "("}, "pattern does not compile"),
    ],
)
def test_inconsistent_declarations_are_refused(fields: dict[str, object], message: str) -> None:
    assert any(message in text for _, text in arg_problems(**fields)), arg_problems(**fields)
    with pytest.raises(ValueError, match=re.escape(message)):
        Arg("x", **fields)  # type: ignore[arg-type]


def test_every_problem_is_named_at_once() -> None:
    problems = arg_problems(type=bool, minimum=1, max_length=2, pattern="x", choices=[])
    assert [field for field, _ in problems] == ["minimum", "max_length", "pattern", "choices"]


def test_tool_and_tooldef_take_args_of_arg() -> None:
    quantity = Arg("how many", type=int, minimum=1, maximum=10)
    tool = Tool(description="Buy.", access=ToolWrite, args={"q": quantity, "id": "event"})
    assert tool.args["q"] is quantity and tool.args["id"] == Arg("event")
    assert make_def(args={"id": "the order id", "n": quantity}).args["n"] == quantity


def test_checked_tool_def_is_the_entry_the_constructor_makes() -> None:
    """Generate's way to make an entry from fields it has read: the same value, to the field."""
    args = {"reason": "why", "id": Arg("the order id", type=int, minimum=1)}
    made = make_def(args=args)
    fields = {f.name: getattr(made, f.name) for f in dataclasses.fields(ToolDef)}
    quick = checked_tool_def(**{**fields, "args": args})
    assert quick == made and repr(quick) == repr(made) and hash(quick) == hash(made)
    assert list(vars(quick).items()) == list(vars(made).items())
    assert isinstance(quick.args, ArgMap) and list(quick.args) == ["id", "reason"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.id = "other"  # type: ignore[misc]

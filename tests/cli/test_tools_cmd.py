"""`rastrillo tools list` and `rastrillo tools schemas` on an app folder."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rastrillo.cli.main import main
from rastrillo.loader import load_options
from rastrillo.tools import FORMATS, schemas
from tests.support import write_app

TICKETS = Path(__file__).resolve().parents[2] / "examples" / "tickets"


def test_list_shows_id_access_route_and_description(capsys):
    assert main(["tools", "list", "--app", str(TICKETS)]) == 0
    lines = capsys.readouterr().out.splitlines()
    cancel = next(line for line in lines if line.startswith("orders_id_cancel_post"))
    assert cancel.split()[1:4] == ["write", "POST", "/orders/{id}/cancel"]
    assert "Cancel one of my orders" in cancel
    assert len(lines) == len(load_options(TICKETS).tools)


@pytest.mark.parametrize("fmt", FORMATS)
def test_schemas_print_the_registry_in_each_format(fmt, capsys):
    assert main(["tools", "schemas", "--app", str(TICKETS), "--format", fmt]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == schemas(load_options(TICKETS).tools, format=fmt)


def test_an_unknown_format_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["tools", "schemas", "--app", str(TICKETS), "--format", "claude"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_folder_without_an_app_is_a_clear_error(tmp_path, capsys):
    assert main(["tools", "list", "--app", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no app.py" in err
    assert "Traceback" not in err


def test_an_app_without_tools_says_how_to_declare_one(tmp_path, capsys):
    handle = "def handle(ctx):\n    return ctx.text('x')\n"
    app = write_app(tmp_path / "app", {"index.GET.py": handle})
    assert main(["tools", "list", "--app", str(app)]) == 0
    assert "TOOL = rastrillo.Tool" in capsys.readouterr().out


def test_list_prints_an_authors_control_characters_escaped_one_line_per_tool(tmp_path, capsys):
    handle = (
        "import rastrillo\n"
        "TOOL = rastrillo.Tool(description='Shows it\\n\\x1b[2Jforged  \\u202eevil\\u2028x')\n"
        "def handle(ctx):\n    return ctx.text('x')\n"
    )
    app = write_app(tmp_path / "app", {"index.GET.py": handle})
    assert main(["tools", "list", "--app", str(app)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "\x1b" not in out and "\u202e" not in out and "\u2028" not in out
    assert "Shows it\\n\\x1b[2Jforged  \\u202eevil\\u2028x" in out


@pytest.mark.parametrize("agent", ["bad name", "x\x1b[31m", ".dot", "a" * 65])
def test_call_refuses_a_name_no_agent_may_have_before_calling_and_escaped(agent, tmp_path, capsys):
    db = tmp_path / "app.db"
    call = ["tools", "call", "orders_get", "--as", agent, "--user", "1"]
    with pytest.raises(SystemExit) as exit_:
        main([*call, "--app", str(TICKETS), "--db", str(db)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "is no agent name: an agent name is 1 to 64 letters, digits" in err
    assert "\x1b" not in err
    assert not db.exists()  # refused as a usage error: no app opened, no audit row


def test_call_prints_a_handlers_traceback_escaped_on_stderr(tmp_path):
    failing = """
        import rastrillo

        TOOL = rastrillo.Tool(description="Fail.")


        def handle(ctx):
            raise RuntimeError("\\x1b[2J\\x1b]0;pwned\\x07 boom")
    """
    app = write_app(tmp_path / "app", {"fail.GET.py": failing})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rastrillo.cli.main",
            "tools",
            "call",
            "fail_get",
            "--as",
            "bot",
            "--user",
            "1",
            "--app",
            str(app),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout.startswith("500")
    assert "RuntimeError: \\x1b[2J\\x1b]0;pwned\\x07 boom" in done.stderr  # escaped, one line
    assert "\x1b" not in done.stderr


@pytest.mark.parametrize(
    "words",
    [
        ["id=1", "--as", "concierge", "--user", "1"],
        ["--as", "concierge", "--user", "1", "id=1"],
        ["--as", "concierge", "id=1", "--user", "1"],
    ],
    ids=["args-first", "options-first", "args-between"],
)
def test_call_takes_its_args_before_after_or_between_the_options(words, tmp_path, capsys):
    db = tmp_path / "app.db"
    argv = ["tools", "call", "orders_id_get", *words, "--app", str(TICKETS), "--db", str(db)]
    assert main(argv) == 0
    status, body = capsys.readouterr().out.splitlines()
    assert status == "200"
    assert json.loads(body)["order"]["id"] == 1


def test_call_still_refuses_an_unknown_option_among_its_args(tmp_path, capsys):
    argv = ["tools", "call", "orders_id_get", "--as", "concierge", "id=1", "--ask", "x"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--user", "1", "--app", str(TICKETS), "--db", str(tmp_path / "app.db")])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --ask" in capsys.readouterr().err


def test_call_prints_a_json_body_escaped_once_so_it_parses_back_as_the_value(tmp_path, capsys):
    """A JSON body already escapes its quotes, backslashes and controls: printed escaped
    again, ``"say \\"hi\\""`` read ``"say \\\\"hi\\\\""``, which is not what the app
    returned. It is printed as its value's JSON, JSON's escapes the one escaping, and what
    JSON leaves and a terminal must not show (a line separator, a look-alike) as JSON
    escapes too: the line parses back to exactly what the app returned."""
    value = {"note": 'say "hi" \\x1b \x1b \u2028 p\u0430ypal', "n": [1.5, -0.0, 10**20]}
    echo = f"""
        import rastrillo

        TOOL = rastrillo.Tool(description="Echo.")


        def handle(ctx):
            return ctx.json({value!r})
    """
    app = write_app(tmp_path / "app", {"echo.GET.py": echo})
    argv = ["tools", "call", "echo_get", "--as", "bot", "--user", "1", "--app", str(app)]
    assert main(argv) == 0
    status, body = capsys.readouterr().out.splitlines()
    assert status == "200"
    assert json.loads(body) == value
    assert '"say \\"hi\\" \\\\x1b \\u001b \\u2028 p\\u0430ypal"' in body

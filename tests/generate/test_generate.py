"""`rastrillo generate`: what it writes, what it refuses, and that it is deterministic."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rastrillo.cli.main import main
from rastrillo.errors import GenerateError
from rastrillo.generate import generate

HANDLE = "def handle(ctx):\n    return ctx.text('ok')\n"


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "actions" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    gen = root / "gen"
    return {p.name: p.read_bytes() for p in sorted(gen.iterdir())} if gen.exists() else {}


def test_routes_cover_every_action_and_skip_underscored(tmp_path):
    make(
        tmp_path,
        {
            "index.GET.py": HANDLE,
            "orders/[id]/cancel.POST.py": HANDLE,
            "_helpers.py": "x = 1\n",
            "_private/secret.GET.py": HANDLE,
            "notes.txt": "not python",
        },
    )
    generate(tmp_path)
    text = (tmp_path / "gen" / "routes.py").read_text()
    assert '("GET", "/", "actions/index.GET.py")' in text
    assert '("POST", "/orders/{id}/cancel", "actions/orders/[id]/cancel.POST.py")' in text
    assert "secret" not in text and "_helpers" not in text


def test_output_is_byte_identical_whatever_the_file_order(tmp_path):
    files = {f"d{i}/[p]/x{i}.{m}.py": HANDLE for i in range(20) for m in ("GET", "POST")}
    a = make(tmp_path / "a", files)
    b = make(tmp_path / "b", dict(reversed(list(files.items()))))
    generate(a)
    generate(b)
    assert snapshot(a) == snapshot(b)
    assert generate(a) == []  # second run changes nothing


def test_check_reports_stale_and_writes_nothing(tmp_path):
    make(tmp_path, {"index.GET.py": HANDLE})
    assert generate(tmp_path, check=True) == ["__init__.py", "routes.py", "tools.py"]
    assert not (tmp_path / "gen").exists()
    generate(tmp_path)
    assert generate(tmp_path, check=True) == []
    make(tmp_path, {"more.GET.py": HANDLE})
    before = snapshot(tmp_path)
    assert generate(tmp_path, check=True) == ["routes.py"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"a.GET.py": HANDLE, "a/index.GET.py": HANDLE},
            ["actions/a/index.GET.py: GET /a is also served by actions/a.GET.py"],
        ),
        (
            {"[id].GET.py": HANDLE, "[key].GET.py": HANDLE},
            ["actions/[key].GET.py: GET /{key} is also served by actions/[id].GET.py"],
        ),
        ({"x.FETCH.py": HANDLE}, ["actions/x.FETCH.py: bad method 'FETCH'"]),
        ({"[]/x.GET.py": HANDLE}, ["actions/[]/x.GET.py: empty parameter []"]),
        ({"x.GET.py": "def handle(ctx):\n    return (\n"}, ["actions/x.GET.py:2: syntax error"]),
        ({"x.GET.py": "def other(ctx):\n    pass\n"}, ["actions/x.GET.py: defines no handle(ctx)"]),
    ],
)
def test_refusals_name_the_file_and_leave_gen_alone(tmp_path, files, expected):
    make(tmp_path, {"index.GET.py": HANDLE})
    generate(tmp_path)
    before = snapshot(tmp_path)
    make(tmp_path, files)
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "handle",
    [
        "def handle():",
        "async def handle():",
        "def handle(ctx, db):",
        "def handle(*, ctx):",
        "def handle(ctx, *, user):",
        "def handle(**kwargs):",
    ],
)
def test_a_handle_that_cannot_take_ctx_is_refused_at_its_line(tmp_path, handle):
    make(tmp_path, {"x.GET.py": f"import rastrillo\n\n{handle}\n    return None\n"})
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    assert str(info.value) == "actions/x.GET.py:3: handle takes one argument, ctx: def handle(ctx)"


@pytest.mark.parametrize(
    "handle",
    [
        "def handle(ctx):",
        "async def handle(ctx):",
        "def handle(ctx, db=None):",
        "def handle(ctx, /):",
        "def handle(*args):",
        "def handle(ctx, *, user=None, **extra):",
    ],
)
def test_a_handle_that_takes_ctx_is_taken(tmp_path, handle):
    make(tmp_path, {"x.GET.py": f"{handle}\n    return None\n"})
    generate(tmp_path)
    assert '("GET", "/x", "actions/x.GET.py")' in (tmp_path / "gen" / "routes.py").read_text()


@pytest.mark.parametrize(
    ("file", "refusal"),
    [
        ("mcp.POST.py", "POST /mcp is the framework's (MCP, with Options(mcp=True))"),
        ("healthz.GET.py", "GET /healthz is the framework's (the health check)"),
        ("readyz.GET.py", "GET /readyz is the framework's (the readiness check)"),
        ("api/version.GET.py", "GET /api/version is the framework's (the app's version)"),
        ("api/next-due.GET.py", "GET /api/next-due is the framework's (when the app next"),
        ("static/[name].GET.py", "GET /static/{name} is the framework's (the static/ folder)"),
    ],
)
def test_an_action_at_a_path_the_framework_serves_is_refused(tmp_path, file, refusal):
    make(tmp_path, {file: HANDLE})
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    assert str(info.value).startswith(f"actions/{file}: {refusal}")
    assert str(info.value).endswith("this action would never run; choose another path")


def test_a_parameter_route_beside_the_framework_paths_is_the_apps(tmp_path):
    make(tmp_path, {"[page].GET.py": HANDLE, "mcp/[tool].GET.py": HANDLE, "api/[x].GET.py": HANDLE})
    generate(tmp_path)
    routes = (tmp_path / "gen" / "routes.py").read_text()
    for path in ("/{page}", "/mcp/{tool}", "/api/{x}"):
        assert f'("GET", "{path}",' in routes


def test_files_are_decoded_as_python_imports_them(tmp_path):
    latin1 = '# -*- coding: latin-1 -*-\nTOOL = rastrillo.Tool(description="Caf\u00e9.")\n'
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "cafe.GET.py").write_bytes(
        latin1.encode("latin-1") + b"import rastrillo\n" + HANDLE.encode()
    )
    generate(tmp_path)
    assert 'description="Caf\u00e9."' in (tmp_path / "gen" / "tools.py").read_text("utf-8")
    (tmp_path / "actions" / "bad.GET.py").write_bytes(b"x = '\xff'\n" + HANDLE.encode())
    (tmp_path / "actions" / "gone.GET.py").symlink_to(tmp_path / "nowhere.py")
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    message = str(info.value)
    assert "actions/bad.GET.py:1: syntax error: (unicode error) 'utf-8' codec" in message
    assert "actions/gone.GET.py: cannot be read: No such file or directory" in message


def test_a_file_longer_than_one_read_is_read_whole(tmp_path):
    # generate reads 64 KiB at a time: here `handle` and the error sit past the first read.
    padding = "".join(f"# line {i} of a long comment\n" for i in range(5000))
    make(tmp_path, {"long.GET.py": padding + HANDLE, "bad.GET.py": padding + "def (\n"})
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    assert [str(p) for p in info.value.problems] == [
        "actions/bad.GET.py:5001: syntax error: invalid syntax"
    ]


def test_every_problem_is_listed_at_once(tmp_path):
    make(tmp_path, {"a.FETCH.py": HANDLE, "b.GET.py": "def (", "[]/c.GET.py": HANDLE})
    with pytest.raises(GenerateError) as info:
        generate(tmp_path)
    assert len(info.value.problems) == 3


def test_problems_with_and_without_a_line_in_one_file_are_listed_in_order(tmp_path, capsys):
    # No handle (a problem with no line) and a TOOL broken at its lines, in one file: the
    # problems sort as one list, the file's lineless problem first, then by line.
    tool = 'import rastrillo\nTOOL = rastrillo.Tool(description="d")\nTOOL = 3\n'
    make(tmp_path, {"a.GET.py": tool, "b.GET.py": "def other(ctx):\n    pass\n"})
    assert main(["generate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "actions/a.GET.py: defines no handle(ctx) at module level",
        "actions/a.GET.py:3: TOOL is assigned more than once; an action declares one tool",
        "actions/b.GET.py: defines no handle(ctx) at module level",
        "3 problems; gen/ left as it was",
    ]


def test_cli_prints_problems_without_traceback(tmp_path, capsys):
    make(tmp_path, {"a.FETCH.py": HANDLE})
    assert main(["generate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "actions/a.FETCH.py: bad method" in err
    assert "Traceback" not in err
    assert "gen/ left as it was" in err


def test_cli_check_exit_codes(tmp_path, capsys):
    make(tmp_path, {"index.GET.py": HANDLE})
    assert main(["generate", "--check", str(tmp_path)]) == 1
    assert main(["generate", str(tmp_path)]) == 0
    assert main(["generate", "--check", str(tmp_path)]) == 0


def test_cli_missing_actions_folder(tmp_path, capsys):
    assert main(["generate", str(tmp_path)]) == 1
    assert "no actions/ folder" in capsys.readouterr().err


def test_generated_code_is_ruff_clean_and_format_stable(tmp_path):
    make(tmp_path, {"index.GET.py": HANDLE, "a/[b].POST.py": HANDLE})
    generate(tmp_path)
    ruff = [sys.executable, "-m", "ruff"]
    gen = str(tmp_path / "gen")
    subprocess.run([*ruff, "check", "--isolated", "--select", "E,F,W,I", gen], check=True)
    subprocess.run([*ruff, "format", "--isolated", "--check", gen], check=True)


def test_generated_routes_load_handlers(tmp_path):
    source = "async def handle(ctx):\n    return ctx.text(ctx.params['id'])\n"
    make(tmp_path, {"orders/[id].GET.py": source})
    generate(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gen import routes; r = routes()[0]; print(r.path, r.is_async)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ},
        check=True,
    )
    assert out.stdout.strip() == "/orders/{id} True"

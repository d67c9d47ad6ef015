"""Reading action files in forked processes: the same `gen/`, problems and errors as one
process, children never lost or left running."""

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rastrillo.errors import GenerateError, RastrilloError
from rastrillo.generate import generate, parallel, scan_actions
from rastrillo.generate.parallel import WorkerLost, map_chunks
from tests.support import missing

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")

HANDLE = "def handle(ctx):\n    return ctx.text('ok')\n"
READ = (
    "import rastrillo\n\n"
    "TOOL = rastrillo.Tool(description='Show item {i}.', args={{'id': 'the item id'}})\n\n" + HANDLE
)
WRITE = (
    "from rastrillo import Arg, Tool, ToolWrite\n\n"
    "TOOL = Tool(\n    description='Change item {i}: \"quoted\", caf\\u00e9.',\n"
    "    access=ToolWrite,\n"
    "    args={{'id': Arg('the item id', type=int, minimum=1), 'note': 'a note'}},\n"
    "    confirm='Change item {{id}} with {{note}}?',\n)\n\n" + HANDLE
)
BROKEN = [
    "def handle(:\n",  # a syntax error
    "x = 1\n",  # no handle
    "def handle():\n    pass\n",  # handle takes no ctx
    "import rastrillo\nTOOL = rastrillo.Tool(descripton='typo')\n" + HANDLE,
    "import rastrillo\nTOOL = rastrillo.Tool(description='w', access=rastrillo.ToolWrite)\n"
    + HANDLE,  # a write tool on GET, with no confirm
    "import rastrillo\nTOOL = rastrillo.Tool(description='', args={'id': 3})\n" + HANDLE,
    "import rastrillo\nTOOL = 1\nTOOL = 2\n" + HANDLE,
    b"# coding: latin-1\n\xff = 1\n".decode("latin-1"),  # no handle, read as latin-1
]


@pytest.fixture(params=["pidfd", "number"])
def children_named(request, monkeypatch):
    """Each test twice where Linux names children by descriptor: once so, once by their
    number, as where there is no `os.pidfd_open` (macOS, a kernel before 5.3)."""
    if request.param == "number":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    return request.param


def valid_app(root: Path, count: int) -> Path:
    for i in range(count):
        write = i % 2
        path = (
            root / "actions" / f"s{i // 20}" / f"item{i}" / f"[id].{'POST' if write else 'GET'}.py"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((WRITE if write else READ).format(i=i), encoding="utf-8")
    return root


def broken_app(root: Path, count: int) -> Path:
    """Good files and files breaking a rule each, mixed, with problems across files too:
    tool ids used twice, two files for one route, a path the framework serves."""
    valid_app(root, count)
    for i in range(0, count, 3):
        path = next((root / "actions" / f"s{i // 20}" / f"item{i}").iterdir())
        path.write_text(BROKEN[i % len(BROKEN)], encoding="latin-1")
    actions = root / "actions"
    (actions / "twice").mkdir()
    (actions / "twice" / "[id].GET.py").write_text(READ.format(i="twice"))
    (actions / "twice" / "[other].GET.py").write_text(READ.format(i="again"))
    (actions / "s0" / "item0_x").mkdir()
    (actions / "s0" / "item0_x" / "[id].GET.py").write_text(READ.format(i="clash"))
    (actions / "s0" / "item0-x").mkdir()
    (actions / "s0" / "item0-x" / "[id].GET.py").write_text(READ.format(i="clash"))
    (actions / "healthz.GET.py").write_text(HANDLE)
    return root


def outcome(root: Path, processes: int) -> tuple[dict[str, bytes], list[object]]:
    """What `generate` leaves in gen/ and the problems it raises, from a fresh gen/."""
    problems: list[object] = []
    try:
        generate(root, processes=processes)
    except GenerateError as exc:
        problems = list(exc.problems)
    gen = root / "gen"
    files = {p.name: p.read_bytes() for p in sorted(gen.iterdir())} if gen.exists() else {}
    for path in gen.glob("*") if gen.exists() else ():
        path.unlink()
    return files, problems


@pytest.mark.parametrize("make", [valid_app, broken_app])
def test_a_parallel_read_gives_the_gen_and_problems_of_a_sequential_one(tmp_path, make):
    app = make(tmp_path, 90)
    sequential = outcome(app, processes=1)
    assert sequential[0] if make is valid_app else len(sequential[1]) > 30
    for processes in (2, 3, 7):
        assert outcome(app, processes) == sequential
    actions, problems = scan_actions(app, processes=1)
    parallel_actions, parallel_problems = scan_actions(app, processes=4)
    fields = [(a.source, a.method, a.path, a.tool) for a in actions]
    assert [(a.source, a.method, a.path, a.tool) for a in parallel_actions] == fields
    assert parallel_problems == problems


def test_the_command_on_one_cpu_and_on_several_prints_and_writes_the_same(tmp_path):
    """The whole command, deciding for itself: parallel where it may use two CPUs (450
    files are above the threshold), sequential when held to one; its forks are counted."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) < 2:
        missing("a second CPU to compare one with")
    for make in (valid_app, broken_app):
        app = make(tmp_path / make.__name__, 450)
        runs = []
        for allowed in (cpus, {min(cpus)}):
            code = (
                f"import os, sys; os.sched_setaffinity(0, {allowed!r}); forks = []; "
                "os.register_at_fork(after_in_parent=lambda: forks.append(1)); "
                "from rastrillo.cli.main import main; status = main(); "
                "print(len(forks), file=sys.stderr); sys.exit(status)"
            )
            command = [sys.executable, "-c", code, "generate", str(app)]
            run = subprocess.run(command, capture_output=True, text=True)
            gen = app / "gen"
            files = {p.name: p.read_bytes() for p in sorted(gen.glob("*"))}
            for path in gen.glob("*"):
                path.unlink()
            *stderr, forks = run.stderr.splitlines()
            runs.append((run.returncode, run.stdout, stderr, files, int(forks)))
        assert runs[0][:4] == runs[1][:4]
        assert (runs[0][4], runs[1][4]) == (min(len(cpus), 450 // 200) - 1, 0)
        assert "Traceback" not in run.stderr


def test_chunks_are_worked_in_children_and_joined_in_order():
    pids = map_chunks(lambda chunk: [(item, os.getpid()) for item in chunk], range(10), 3)
    assert [item for item, _ in pids] == list(range(10))
    assert [pid for _, pid in pids][:4] == [os.getpid()] * 4
    assert len({pid for _, pid in pids}) == 3


def test_a_child_works_a_chunk_smaller_by_what_sending_its_results_costs():
    """Sending a result costing a tenth of working an item, each of two children works
    1,000 / 3.1 items (322) and this process the rest: 356, and the order is kept."""
    pids = map_chunks(
        lambda chunk: [(item, os.getpid()) for item in chunk], range(1000), 3, sending=0.1
    )
    assert [item for item, _ in pids] == list(range(1000))
    counts = [sum(1 for _, pid in pids if pid == one) for one in dict.fromkeys(p for _, p in pids)]
    assert counts == [356, 322, 322]
    assert pids[0][1] == os.getpid()


def test_a_child_that_dies_is_reported_not_lost(children_named):
    parent = os.getpid()

    def work(chunk):
        if os.getpid() != parent and 7 in chunk:
            os.kill(os.getpid(), 9)
        return list(chunk)

    with pytest.raises(WorkerLost, match=r"reading 5 of the action files was ended by signal 9"):
        map_chunks(work, range(10), 2)
    assert issubclass(WorkerLost, RastrilloError)  # the command line prints it, no traceback


def test_a_child_that_exits_before_sending_is_reported_with_its_status(children_named):
    parent = os.getpid()

    def work(chunk):
        if os.getpid() != parent:
            os._exit(5)
        return list(chunk)

    with pytest.raises(WorkerLost, match=r"reading 5 of the action files exited with status 5 "):
        map_chunks(work, range(10), 2)


def test_what_a_childs_work_raises_is_raised_here_as_a_sequential_run_raises_it():
    def work(chunk):
        if 7 in chunk:
            raise ValueError(f"no 7 in {list(chunk)}")
        return list(chunk)

    with pytest.raises(ValueError, match=r"no 7 in \[5, 6, 7, 8, 9\]"):
        map_chunks(work, range(10), 2)


def test_children_are_killed_and_reaped_when_this_process_stops_early(children_named):
    """This process's own chunk raises while a child is still working (blocked on a pipe
    nobody writes): the child is killed and reaped, and the error is this process's."""
    parent = os.getpid()
    told, tell = os.pipe()
    never, hold = os.pipe()

    children = []

    def work(chunk):
        if os.getpid() == parent:
            children.append(int(os.read(told, 64)))  # the child is working
            raise KeyError("the parent's own chunk")
        os.write(tell, str(os.getpid()).encode())
        os.read(never, 1)  # blocks until killed
        return list(chunk)

    try:
        with pytest.raises(KeyError):
            map_chunks(work, range(4), 2)
        [child] = children
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)  # reaped already: no such child
    finally:
        for fd in (told, tell, never, hold):
            os.close(fd)


THREADS_SEEN = """\
import _thread, os, threading
from rastrillo.generate.parallel import processes_for
seen = [processes_for(99, least=100), processes_for(10_000, least=100)]
started, release = threading.Event(), threading.Event()
_thread.start_new_thread(lambda: (started.set(), release.wait()), ())
started.wait()
seen.append(processes_for(10_000, least=100))
print(len(os.sched_getaffinity(0)), *seen)
"""


def test_one_process_where_another_thread_runs_or_too_few_items():
    """In a process of its own (a pytest worker has threads of its own): one process for
    too few items; one a CPU it may use for many; one again once a thread runs beside it,
    even one a library started without `threading` (a file watcher's, in C), which a fork
    would leave behind holding whatever lock it held."""
    shown = subprocess.run(
        [sys.executable, "-c", THREADS_SEEN],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpus, few, many, beside_a_thread = map(int, shown.split())
    assert (few, many, beside_a_thread) == (1, min(cpus, 100), 1)


def test_a_fork_refused_reads_its_chunks_here_and_leaves_no_pipe_open(monkeypatch):
    """`os.fork` refused (EAGAIN: too many processes) after a first child: the chunks no
    child took are worked in this process, in order, as one process would have, and the
    pipe made for the refused child is closed, not left open for the rest of the process."""
    real_fork = os.fork
    forks = []

    def refused_after_one():
        if forks:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        forks.append(1)
        return real_fork()

    opened = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    monkeypatch.setattr(os, "fork", refused_after_one)
    assert map_chunks(list, range(12), 4) == list(range(12))
    assert forks == [1]
    if opened is not None:
        assert set(os.listdir("/proc/self/fd")) == opened


def test_children_reaped_by_the_kernel_still_give_their_results(children_named):
    """A process that ignores SIGCHLD has its children reaped by the kernel, so their
    status is gone: what they sent is taken, as a sequential run would have read it."""
    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert map_chunks(list, range(10), 2) == list(range(10))
    finally:
        signal.signal(signal.SIGCHLD, before)


def test_results_cut_short_with_no_status_to_say_why_are_a_lost_child_not_a_traceback():
    """A child killed as it wrote, reaped by the kernel (SIGCHLD ignored: no status left):
    what came through its pipe is part of a pickle, reported as a lost child."""
    whole = pickle.dumps(list(range(10_000)))
    with pytest.raises(WorkerLost, match="a process reading 7 of the action files ended before"):
        parallel._loaded(whole[: len(whole) // 2], None, 7)
    assert parallel._loaded(whole, None, 7) == list(range(10_000))


NUMBER_GIVEN_AGAIN = """\
import os, signal
from rastrillo.generate.parallel import map_chunks

signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps this process's children
parent = os.getpid()
told, tell = os.pipe()
asked, ask = os.pipe()
answer, answered = os.pipe()
seen = []


def work(chunk):
    if os.getpid() != parent:
        os.write(tell, str(os.getpid()).encode())
        return list(chunk)
    child = int(os.read(told, 64))
    try:
        os.waitpid(-1, 0)  # ignoring SIGCHLD: fails once every child has ended and gone
    except ChildProcessError:
        pass
    with open("/proc/sys/kernel/ns_last_pid", "w") as last:
        last.write(str(child - 1))  # the next process made gets the child's number
    stranger = os.fork()
    if not stranger:  # answers each question while it lives
        while os.read(asked, 1):
            os.write(answered, b"y")
        os._exit(0)
    os.close(answered)
    seen.extend((child, stranger))
    raise KeyError("this process's own chunk")


try:
    map_chunks(work, range(4), 2)
except KeyError:
    pass
os.write(ask, b"?")
print(*seen, os.read(answer, 1) == b"y")
"""


def test_a_child_reaped_by_the_kernel_is_not_signalled_by_its_number_given_again():
    """Ignoring SIGCHLD, a child that has ended is reaped by the kernel and its number may
    go to a new process; the cleanup after an early stop must not kill that stranger.
    Run as the first process of a new PID namespace, where the number the next process
    gets can be set (``ns_last_pid``: root only), so the stranger gets the child's."""
    namespace = _pid_namespace()
    if namespace is None:
        missing("unshare(1) and a PID namespace of its own (as root, or in a user namespace)")
    shown = subprocess.run(
        [*namespace, sys.executable, "-c", NUMBER_GIVEN_AGAIN],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,  # a cleanup that kills the stranger leaves the question unanswered
    ).stdout
    child, stranger, answered = shown.split()
    assert child == stranger  # the stranger has the child's number
    assert answered == "True"  # and is alive


def _pid_namespace() -> list[str] | None:
    """The command that runs a program as the first process of a new PID namespace, where
    it may set ``ns_last_pid``: as root, or as root of a new user namespace (any user, where
    the kernel allows those); None where neither can be made."""
    plain = ["unshare", "--pid", "--fork", "--mount-proc"]
    for command in (plain, ["unshare", "--user", "--map-root-user", *plain[1:]]):
        try:
            if subprocess.run([*command, "true"], capture_output=True).returncode == 0:
                return command
        except FileNotFoundError:
            return None
    return None

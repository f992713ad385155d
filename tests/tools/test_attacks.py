"""The built-in tools against hostile input: what a model (or a process beside it) tries must not
freeze the process, block forever, escape the root or leak a key."""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import shlex
import signal as signals
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from piagent import AbortController, AgentTool
from piagent.tools import list_dir, read_file, run_command, write_file
from piagent.tools._pids import PidsCgroup, _own_pids_cgroup
from piagent.tools.calculator import MAX_ROUND_DIGITS, CalculatorError, evaluate
from piagent.tools.command import THREADS_PER_PROCESS

pytestmark = pytest.mark.timeout(20)


def call(t: AgentTool, signal: Any = None, **args: Any) -> str:
    result = t.execute("call-1", args, signal or AbortController().signal, lambda partial: None)
    return "".join(block.text for block in result.content)


# --------------------------------------------------------------------------- calculator


@pytest.mark.parametrize("expression", ["round(1, -10**9)", "round(7, 10**9)", "round(2.5, -5000)"])
def test_calculator_refuses_round_to_an_absurd_number_of_digits(expression: str) -> None:
    with pytest.raises(CalculatorError, match=f"digits is not allowed \\(at most {MAX_ROUND_DIGITS} either way\\)"):
        evaluate(expression)


def test_calculator_still_rounds_within_the_bound() -> None:
    assert evaluate("round(123456, -3)") == 123000 and evaluate("round(2.675, 2)") == 2.67


# --------------------------------------------------------------------------- run_command


def kill_escaped(pid_file: Path) -> None:
    """SIGKILL the process the command detached (it left the command's group on purpose)."""
    if pid_file.exists() and pid_file.read_text().strip():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signals.SIGKILL)


def test_a_detached_child_holding_the_output_does_not_keep_the_call_alive(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    try:
        text = call(run_command(tmp_path), command=f"setsid sleep 45 & echo $! > {pid_file}; echo started")
    finally:
        kill_escaped(pid_file)
    assert text.startswith("started")
    assert text.endswith(
        "[Output no longer read: a background process that left the command's group still holds it open]"
    )


def test_the_timeout_ends_the_call_whatever_a_detached_child_does(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    try:
        with pytest.raises(TimeoutError, match="Command timed out after 0.3 seconds and was killed"):
            call(run_command(tmp_path, timeout=0.3), command=f"setsid sleep 45 & echo $! > {pid_file}; sleep 30")
    finally:
        kill_escaped(pid_file)


def test_an_abort_ends_the_call_whatever_a_detached_child_does(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    controller = AbortController()

    def abort_once_started() -> None:
        while not (pid_file.exists() and pid_file.read_text().strip()):
            if controller.signal.wait(0.01):
                return
        controller.abort()

    threading.Thread(target=abort_once_started, daemon=True).start()
    try:
        with pytest.raises(RuntimeError, match="Command aborted"):
            call(run_command(tmp_path), controller.signal, command=f"setsid sleep 45 & echo $! > {pid_file}; sleep 30")
    finally:
        controller.abort()
        kill_escaped(pid_file)


COMMON_SECRETS = {
    "OPENAI_API_KEY": "sk-openai-leak",
    "HF_TOKEN": "hf-leak",
    "AWS_SECRET_ACCESS_KEY": "aws-leak",
    "DB_PASSWORD": "pw-leak",
    "PGPASSWORD": "pg-leak",
    "MYSQL_PWD": "mysql-leak",
    "DATABASE_URL": "postgres://app:db-url-leak@db/app",
    "REDIS_URL": "redis://:redis-leak@cache:6379/0",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent-leak.sock",
    "SECRET_KEY_BASE": "rails-leak",
    "DJANGO_SECRET_KEY": "django-leak",
    "GITHUB_PAT": "ghp-leak",
    "NPM_AUTH": "npm-leak",
    "AWS_SESSION_TOKEN": "aws-session-leak",
    "GOOGLE_APPLICATION_CREDENTIALS": "/keys/gcp-leak.json",
    "SENTRY_DSN": "https://sentry-leak@o1.ingest.sentry.io/1",
    "KUBECONFIG": "/home/me/.kube/kube-leak",
    "DOCKER_AUTH_CONFIG": "docker-leak",
}


def test_commands_see_only_the_allowlisted_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in COMMON_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TIME", "C")
    text = call(run_command(tmp_path), command="env")
    assert [name for name, value in COMMON_SECRETS.items() if value in text] == []
    assert f"PATH={os.environ['PATH']}" in text and "LC_TIME=C" in text


def test_inherit_names_the_further_variables_a_command_sees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "wanted")
    monkeypatch.setenv("OTHER", "not wanted")
    text = call(run_command(tmp_path, inherit=["PGPASSWORD"]), command="env")
    assert "PGPASSWORD=wanted" in text and "OTHER" not in text


def test_an_explicit_environment_is_passed_as_given(tmp_path: Path) -> None:
    text = call(run_command(tmp_path, env={"PATH": os.environ["PATH"], "MY_TOKEN": "given"}), command="env")
    assert "MY_TOKEN=given" in text


def session_members(session: int) -> list[int]:
    """Live processes of ``session`` (zombies waiting to be reaped are dead)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] not in ("Z", "X") and int(fields[3]) == session:
                found.append(int(name))
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the process bound counts through /proc (Linux)")
@pytest.mark.parametrize("shell_waits", [True, False], ids=["shell-waits", "shell-exits"])
def test_a_fork_bomb_is_killed_as_a_whole_at_the_process_bound(tmp_path: Path, shell_waits: bool) -> None:
    """Bounded (2**8 shells, each sleeping 5 s) so that a failure cannot take the machine down;
    it runs as root in CI, where RLIMIT_NPROC would not apply."""
    pid_file = tmp_path / "pid"
    bomb = f"echo $$ > {pid_file}; b() {{ if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 5; }}; b 7 &"
    with pytest.raises(RuntimeError, match=r"more than 64 processes at once \(max_processes\)"):
        call(run_command(tmp_path), command=bomb + (" wait" if shell_waits else ""))
    assert session_members(int(pid_file.read_text())) == []


def pids_cgroup_available() -> bool:
    probe = PidsCgroup.create(1)
    if probe is None:
        return False
    probe.remove()
    return True


needs_pids_cgroup = pytest.mark.skipif(
    not pids_cgroup_available(), reason="needs a writable pids cgroup (root on Linux, cgroup v1 or delegated v2)"
)


def processes_in_piagent_cgroups() -> list[int]:
    """The processes left in this process's run_command cgroups (removed or being released)."""
    parent = _own_pids_cgroup()
    assert parent is not None
    names = [name for name in os.listdir(parent) if name.startswith(f"piagent-{os.getpid()}-")]
    return [pid for name in names for pid in PidsCgroup(os.path.join(parent, name)).members()]


@needs_pids_cgroup
def test_with_a_pids_cgroup_the_kernel_holds_a_fork_bomb_to_the_thread_bound(tmp_path: Path) -> None:
    """Counting every 50 ms let a bomb start hundreds of shells first; the kernel refuses the
    fork past max_processes x THREADS_PER_PROCESS tasks, so never more run at once.

    Each shell writes + when it starts and - when it exits (dash exits when a fork fails,
    freeing its place for another), so the log's running sum is a lower bound of the shells
    alive at that moment: the SIGKILLed ones never write their -."""
    log = tmp_path / "log"
    bomb = (
        f"b() {{ trap 'echo - >> {log}' EXIT; echo + >> {log}; "
        f"if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 5; }}; b 9 & wait"
    )
    with pytest.raises(RuntimeError, match=r"more than 4 processes at once \(max_processes\)"):
        call(run_command(tmp_path, max_processes=4), command=bomb)
    alive = list(itertools.accumulate(1 if mark == "+" else -1 for mark in log.read_text().split()))
    assert max(alive) <= 4 * THREADS_PER_PROCESS  # 1,023 shells unbounded
    assert processes_in_piagent_cgroups() == []  # every process killed


@needs_pids_cgroup
def test_a_cgroup_being_killed_refuses_every_fork() -> None:
    """Killing frees places: a shell whose fork had failed and that went on, or one retrying
    its fork, took each freed place with a new process, so more started than the bound."""
    cgroup = PidsCgroup.create(8)
    assert cgroup is not None
    try:
        cgroup.kill()
        late = subprocess.run(cgroup.wrap("/bin/true; echo forked"), capture_output=True, text=True, timeout=10)
    finally:
        cgroup.kill()
        cgroup.remove()
    assert "forked" not in late.stdout
    assert "fork" in late.stderr.lower()


@needs_pids_cgroup
def test_with_a_pids_cgroup_processes_that_left_the_session_are_counted_and_killed(tmp_path: Path) -> None:
    escaped = "for i in 1 2 3 4 5 6; do setsid sleep 30 & done; wait"
    with pytest.raises(RuntimeError, match=r"more than 4 processes at once \(max_processes\)"):
        call(run_command(tmp_path, max_processes=4, timeout=20), command=escaped)
    assert processes_in_piagent_cgroups() == []


@needs_pids_cgroup
def test_with_a_pids_cgroup_threads_do_not_count_as_processes(tmp_path: Path) -> None:
    threads = (
        "import threading; e = threading.Event(); ts = [threading.Thread(target=e.wait) for _ in range(20)]; "
        "[t.start() for t in ts]; e.set(); [t.join() for t in ts]; print(len(ts))"
    )
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(threads)}"
    assert call(run_command(tmp_path, max_processes=4), command=command) == "20"


def test_run_command_works_in_a_process_holding_over_a_thousand_descriptors(tmp_path: Path) -> None:
    """select() refuses descriptors numbered 1024 and up; a server process hands those out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the hard limit on open files is below 1,200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:  # every number below 1100 taken: the pipes get higher ones
            held.append(os.open(os.devnull, os.O_RDONLY))
        assert call(run_command(tmp_path), command="echo hello") == "hello"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# --------------------------------------------------------------------------- files


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root").mkdir()
    return tmp_path / "root"


def test_a_fifo_is_refused_by_read_file_and_write_file_instead_of_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(PermissionError, match="pipe is not a regular file"):
        call(read_file(root), path="pipe")
    with pytest.raises(PermissionError, match="pipe is not a regular file"):
        call(write_file(root), path="pipe", content="x")
    with pytest.raises(NotADirectoryError, match="pipe is not a directory"):
        call(list_dir(root), path="pipe")


def bytes_read_by_this_process() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


needs_proc_io = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io")


@needs_proc_io
def test_read_file_reads_only_what_it_returns_from_a_file_without_newlines(root: Path) -> None:
    (root / "blob.txt").write_bytes(b"a" * 20_000_000)
    before = bytes_read_by_this_process()
    text = call(read_file(root, max_bytes=1000), path="blob.txt")
    assert bytes_read_by_this_process() - before < 200_000  # not the 20 MB
    assert text.startswith("a" * 1000) and "[Output truncated at 1000 bytes: showing lines 1-1" in text


@needs_proc_io
def test_read_file_with_limit_stops_reading_after_its_lines(root: Path) -> None:
    (root / "lines.txt").write_bytes(b"short\n" * 3_000_000)  # 18 MB of short lines
    before = bytes_read_by_this_process()
    text = call(read_file(root), path="lines.txt", limit=1)
    assert bytes_read_by_this_process() - before < 200_000
    assert text == "short\n\n\n[Showing lines 1-1; use offset=2 to read on]"


def test_write_file_refuses_a_hard_link_to_a_file_outside_the_root(root: Path) -> None:
    outside = root.parent / "outside.txt"
    outside.write_text("precious")
    os.link(outside, root / "innocent.txt")
    with pytest.raises(PermissionError, match="innocent.txt has 2 hard links; piagent never writes through"):
        call(write_file(root), path="innocent.txt", content="overwritten")
    assert outside.read_text() == "precious"


def test_a_symlink_met_where_a_directory_was_resolved_is_refused_as_a_changed_path(root: Path) -> None:
    """realpath leaves a symlink loop unresolved; opened without following, it is the same case as
    a symlink swapped in after the check, and says so (not a bare 'Not a directory')."""
    os.symlink("loop", root / "loop")
    for tool, args in ((read_file(root), {}), (write_file(root), {"content": "x"})):
        with pytest.raises(PermissionError, match=r"Path 'loop/f.txt' changed while it was opened"):
            call(tool, path="loop/f.txt", **args)
    with pytest.raises(PermissionError, match=r"Path 'loop' changed while it was opened"):
        call(list_dir(root), path="loop")


@pytest.mark.parametrize("swapped", ["file", "directory"])
def test_a_symlink_swapped_in_during_the_call_never_leads_out_of_the_root(root: Path, swapped: str) -> None:
    """Another process flips a path between a real entry and a symlink out of the root, as fast
    as it can, while the tools read and write it: nothing outside is ever read or written."""
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    name = "f.txt" if swapped == "file" else "d"
    target = outside / "f.txt" if swapped == "file" else outside
    path = "f.txt" if swapped == "file" else "d/f.txt"
    stop = threading.Event()

    def flip() -> None:
        entry, n = root / name, 0
        while not stop.is_set():
            n += 1
            real = root / f"real{n}"
            if swapped == "file":
                real.write_text("inside")
            else:
                real.mkdir()
                (real / "f.txt").write_text("inside")
            for replacement in (real, None):  # a real entry, then a symlink out of the root
                try:
                    if entry.is_symlink() or entry.exists():
                        os.rename(entry, root / f"old{n}{replacement is None}")
                    if replacement is None:
                        entry.symlink_to(target)
                    else:
                        os.rename(replacement, entry)
                except OSError:  # the tool under test created the entry meanwhile: go on flipping
                    pass

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    reader, writer = read_file(root), write_file(root)
    try:
        for _ in range(300):
            with contextlib.suppress(OSError):  # refused, or the path vanished meanwhile: both fine
                assert "OUTSIDE" not in call(reader, path=path)
            with contextlib.suppress(OSError):
                call(writer, path=path, content="WRITTEN")
    finally:
        stop.set()
        flipper.join(5)
    assert (outside / "f.txt").read_text() == "OUTSIDE"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]

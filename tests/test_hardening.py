"""A hostile suite or a wrong flag never yields a wrong result or a traceback (issue #14, §1 §2 §5):
real redis-server, real redline-load, real SQLite, real files."""

import json
import sqlite3
from pathlib import Path

import pytest

from redline.core.errors import UsageError
from redline.load.redline_load import LoadRequest
from redline.output.files import check_output_paths

from cli_forks import run_many
from conftest import start_redis_server
from test_run_cli import write_suite


def test_a_suite_cannot_steer_the_load_the_output_files_or_the_servers_files(tmp_path, redline_cli):
    (tmp_path / "decoy-dir").mkdir()
    decoy = start_redis_server(tmp_path / "decoy-dir", unixsocket=str(tmp_path / "decoy.sock"), unixsocketperm="700")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        suite = write_suite(tmp_path, "steering", f"--ratio 1:0 -c 2 -t 1 --test-time 1 --unix-socket {tmp_path}/decoy.sock "
                            f"-o {tmp_path}/out.txt --hdr-file-prefix {tmp_path}/hdr --client-stats {tmp_path}/cs -x 3",
                            db_lines=(f"    dir: {elsewhere}", f"    logfile: {tmp_path}/evil.log",
                                      "    dbfilename: evil.rdb"))
        out = tmp_path / "out.json"
        proc = redline_cli("run", suite, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=0)
        decoy_info = decoy.client().info("stats")
        decoy_keys = decoy.client().dbsize()
    finally:
        decoy.stop()
    (run,) = json.loads(out.read_text())
    assert run["status"] == "ok" and run["ops_per_sec"] > 0
    assert decoy_keys == 0 and decoy_info["total_commands_processed"] < 10    # only our own INFO/DBSIZE
    assert run["server_cpu_us_per_op"] > 0.1                                  # the load hit redline's server
    assert not list(tmp_path.glob("out.txt*")) and not list(tmp_path.glob("hdr*")) and not list(tmp_path.glob("cs*"))
    assert not (tmp_path / "evil.log").exists() and not list(elsewhere.iterdir())
    facts = json.loads(sqlite3.connect(tmp_path / "r.db").execute("SELECT facts FROM runs").fetchone()[0])
    for owned in ("--unix-socket", "-o", "--hdr-file-prefix", "--client-stats", "-x"):
        assert owned not in facts["loadgen_argv"], owned
    assert "dir" not in facts["server_config"] and "logfile" not in facts["server_config"]
    arguments_line = suite.read_text().splitlines().index(next(line for line in suite.read_text().splitlines()
                                                              if "arguments:" in line)) + 1
    assert (f"{suite}:{arguments_line}: clientconfig.arguments: --unix-socket is set by redline (where the load goes); "
            "the suite's value is dropped") in proc.stderr
    assert f"{suite}:7: dbconfig.configuration-parameters: configuration parameter dir is set by redline" in proc.stderr
    validate = redline_cli("suites", "validate", suite, check_exit=0)
    for name in ("--unix-socket", "--out-file", "--hdr-file-prefix", "--client-stats", "--run-count"):
        assert f"clientconfig.arguments: {name} is set by redline" in validate.stdout, name
    for name in ("dir", "logfile", "dbfilename"):
        assert f"configuration parameter {name} is set by redline" in validate.stdout, name


def test_a_redline_owned_server_parameter_on_the_command_line_is_refused(tmp_path, redline_cli):
    proc = redline_cli("run", "quick", "--config", "dir=/tmp", "--store", tmp_path / "r.db", check_exit=2)
    assert proc.stderr.strip() == ("redline: error: --config dir: redline sets this parameter itself "
                                   "(where files are written)")
    assert not (tmp_path / "r.db").exists()


def _suite_with(tmp_path: Path, name: str, **kwargs) -> Path:
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    return write_suite(suites, name, kwargs.pop("arguments", "--ratio 1:0 -c 1 -t 1 --test-time 1"), **kwargs)


def _malformed(tmp: Path) -> list[tuple[list[str], str]]:
    """(arguments, a fragment of the one-line error) for every subcommand."""
    bad_dbconfig = tmp / "bad-dbconfig.yml"
    bad_dbconfig.write_text((tmp / "suites" / "good.yml").read_text().replace(
        "dbconfig:\n  configuration-parameters:\n    save: '\"\"'\n", "dbconfig: 5\n"))
    unknown_flag = _suite_with(tmp, "unknown-flag", arguments="--ratio 1:0 --frobnicate 3 --test-time 1")
    moves_port = _suite_with(tmp, "moves-port", db_lines=("  init_commands:", "  - CONFIG SET port 7777"))
    replicates = _suite_with(tmp, "replicates", arguments='--command "REPLICAOF 10.0.0.1 6379" --test-time 1')
    twin = tmp / "twin"
    twin.mkdir()
    write_suite(twin, "good", "--ratio 0:1 -c 1 -t 1 --test-time 1")
    good = str(tmp / "suites" / "good.yml")
    return [
        (["run", bad_dbconfig], f"{bad_dbconfig}:4: dbconfig must be a mapping, got an integer"),
        (["run", unknown_flag], "unknown memtier_benchmark flag --frobnicate"),
        (["compare", good, twin / "good.yml"], f"two suites are named 'good': {good} and {twin}/good.yml"),
        (["run", moves_port], f"{moves_port}:8: dbconfig.init_commands: CONFIG SET port: redline sets this "
                              "parameter itself (where the load goes)"),
        (["run", replicates], "--command: REPLICAOF makes the server copy another one"),
        (["run", good, "--config", "nosuchparam=1"], "server configuration nosuchparam: /usr/bin/redis-server has no such"),
        (["run", good, "--config", "=1"], "--config expects NAME=VALUE"),
        (["run", good, "--duration", "500ms"], "'500ms' is not a whole number of seconds"),
        (["run", good, "--duration", "1500ms"], "'1500ms' is not a whole number of seconds"),
        (["run", good, "--duration", "0s"], "'0s' is not a whole number of seconds"),
        (["run", good, "--warmup", "soon"], "not a duration"),
        (["run", good, "--warmup", "99999999999999999999h"], "is longer than 24h"),
        (["run", good, "--variant", "O3-lto"], "--variant O3-lto: only git: and src: targets are built"),
        (["run", good, "--name", "("], "invalid name regex '('"),
        (["run", good, "--json", "/proc/redline.json"], "--json /proc/redline.json: cannot write there"),
        (["run", good, "--json", tmp], f"--json {tmp}: is a directory"),
        (["run", good, "--json", "no-dir/two\nlines.json"], "--json no-dir/two\\nlines.json: cannot write there"),
        (["run", good, "--target", f"git:{tmp}/no-repo@main"], f"git repository does not exist: {tmp}/no-repo"),
        (["run", good, "--runs", "-1"], "expected a positive integer"),
        (["run", good, "--store", "/proc/redline.db"], "store /proc/redline.db: cannot be created"),
        (["calibrate", good, "--store", tmp], f"store {tmp}: is a directory"),
        (["compare", good, "--comparison-config", "nosuchparam=1"], "server configuration nosuchparam"),
        (["compare", good, "--baseline-config", "nosuchparam=1"], "server configuration nosuchparam"),
        (["compare", good, "--name", "("], "invalid name regex '('"),
        (["compare", good, "--markdown", "/proc/redline.md"], "--markdown /proc/redline.md: cannot write there"),
        (["compare", good, "--json", "same.out", "--markdown", "same.out"], "--markdown same.out: the same file as --json"),
        (["compare", good, "--max-runs", "0"], "expected a positive integer"),
        (["calibrate", good, "--name", "("], "invalid name regex '('"),
        (["calibrate", good, "--json", "/proc/redline.json"], "--json /proc/redline.json: cannot write there"),
        (["calibrate", good, "--config", "nosuchparam=1"], "server configuration nosuchparam"),
        (["history", "--name", "("], "invalid name regex '('"),
        (["history", "--p-value", "x"], "expected a positive number"),
        (["hotspots", "--top", "0"], "expected a positive integer"),
        (["hotspots", "--store", "none.db"], "no result store at none.db"),
        (["hotspots", "99999999999999999999999999"], "SESSION must be a session number or 'latest'"),
        (["hotspots", "x"], "SESSION must be a session number or 'latest'"),
        (["run", good, "--target", "tcp://[::1"], "needs a host and a port"),
        (["build", f"git:{tmp}/no-repo@main"], f"git repository does not exist: {tmp}/no-repo"),
        (["build", "ftp:somewhere"], "cannot build target 'ftp:somewhere'"),
        (["suites", "validate"], "the following arguments are required: PATH"),
        (["suites", "list", good, "--name", "("], "invalid name regex '('"),
        (["suites", "list", good, "--priority", "x:y"], "priority range must look like A:B"),
        (["suites", "list", good, "--priority", f"{10**250}:1"], f"{10**250} is above 1"),   # longer than a line
        (["suites", "list", tmp / "no-such-dir"], "no such suite file, directory or built-in suite"),
        (["hotspots", "--store", tmp / "suites" / "good.yml"], "is not an SQLite database"),
        (["no-such-command"], "invalid choice: 'no-such-command'"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["run", good, "--export", "redis://[::1"], "--export redis://[::1: not a URL"),
        (["compare", good, "--export", "ftp://h:1"], "--export ftp://h:1: expected redis://HOST:PORT"),
        (["export", "redistimeseries", "x", "--redis", "redis://h"], "SESSION must be a session number"),
        (["export", "redistimeseries", "--redis", "redis://h", "--store", "none.db"], "no result store at none.db"),
        (["report", "x"], "SESSION must be a session number or 'latest'"),
        (["show", "x"], "SESSION must be a session number or 'latest'"),
        (["show", "--format", "nope"], "argument --format: invalid choice: 'nope'"),
        (["report", "--store", tmp, "-o", "r.html"], f"store {tmp}: is a directory"),
        (["bisect", "ftp:x"], "bisect needs a git:REPO target"),
        (["bisect", f"git:{tmp}", "--good", "a", "--bad", "b", "--runs", "3"],
         "--runs 3: a timed bisection step needs at least 5 runs per side"),
        (["gate", good, "--jobs", "0"], "argument --jobs: expected a positive integer, got '0'"),
        (["gate", good, "--budget", "soon"], "not a time budget: 'soon'"),
        (["gate", "--resume", "latest", good], "--resume continues the stored gate with its own targets"),
        (["accuracy", tmp / "none.yaml"], f"{tmp}/none.yaml: cannot read the corpus"),
        (["accuracy", "--only", "("], "invalid name regex '('"),
        # the fleet's commands: no Redis is asked, no store or file is written
        (["submit", "--comparison", "ftp:x"], "unknown target scheme 'ftp'"),
        (["submit", "--comparison", "bin:/usr/bin/redis-server", "--platform", "bad!"], "platform name 'bad!'"),
        (["submit", "--comparison", "bin:/usr/bin/redis-server", "--warmup", "25h"], "is longer than 24h"),
        (["submit", "--comparison", "bin:/usr/bin/redis-server", "--redis", "ftp://x"],
         "--redis ftp://x: expected redis://HOST:PORT/DB"),
        (["submit", "--comparison", "bin:/usr/bin/redis-server", "--redis", "redis://:pw@h:1",
          "--redis-password-file", tmp / "none"], f"--redis-password-file {tmp}/none: No such file"),
        (["api", "--secret-file", tmp / "none", "--repository", tmp], f"--secret-file {tmp}/none: No such file"),
        (["api", "--port", "70000", "--secret-file", "s", "--repository", tmp], "'70000' is not a port"),
        (["api", "--github-repository", "redis", "--secret-file", "s", "--repository", tmp],
         "'redis' is not OWNER/NAME"),
        (["agent", "--platform", "p", "--claim-idle", "0s"], "'0s' is shorter than 2s, the shortest allowed"),
        (["agent", "--platform", "p", "--heartbeat", "0s"], "'0s' is shorter than 0.1s, the shortest allowed"),
        (["agent", "--platform", "p", "--claim-idle", "4s", "--heartbeat", "3s"],
         "--heartbeat 3s is more than half of --claim-idle 4s"),
        (["agent", "--platform", "p", "--allow-target", "ftp:x"], "--allow-target 'ftp:x': expected bin:PATH"),
        (["agent", "--platform", "p", "--allow-target", "git:relative"], "needs an absolute path"),
        (["agent", "--platform", "p", "--store", tmp / "agent.db", "--redis-password-file", tmp / "none"],
         f"--redis-password-file {tmp}/none: No such file"),
        (["collector", "--store", tmp], f"store {tmp}: is a directory"),
        (["collector", "--store", tmp / "c.db", "--export", "redis://[::1"], "--export redis://[::1: not a URL"),
        (["collector", "--store", tmp / "c.db", "--github-token-file", tmp / "none"],
         f"--github-token-file {tmp}/none: No such file"),
        # the closed loop's limits (redline.commands.collector.add_bisect_arguments), on both commands
        (["collector", "--store", tmp / "c.db", "--bisect-max-concurrent", "-1"], "-1 is outside 0..1000"),
        (["collector", "--store", tmp / "c.db", "--bisect-max-steps", "1"], "1 is outside 2..10000"),
        (["collector", "--store", tmp / "c.db", "--bisect-max-queued", "many"], "not a whole number: 'many'"),
        (["collector", "--store", tmp / "c.db", "--bisect-agent-time", "25h"], "'25h' is longer than 24h"),
        (["collector", "--store", tmp / "c.db", "--bisect-agent-time", "10s"], "'10s' is shorter than 60s"),
        (["collector", "--store", tmp / "c.db", "--bisect-stall-after", "soon"], "not a duration: 'soon'"),
        (["fleet", "local", "--store", tmp / "f.db", "--bisect-max-queued", "1001"], "1001 is outside 0..1000"),
        (["fleet", "local", "--store", tmp / "f.db", "--bisect-agent-time", "1d"], "not a duration: '1d'"),
        (["fleet", "local", "--store", tmp / "f.db", "--bisect-stall-after", "5s"], "'5s' is shorter than 30s"),
        (["collector", "--store", tmp / "c.db", "--bisect-measure", "cycles"],
         "argument --bisect-measure: invalid choice: 'cycles'"),
        (["submit", "--comparison", "bin:/usr/bin/redis-server", "--measure", "cycles"],
         "argument --measure: invalid choice: 'cycles'"),
        (["fleet", "local", "--bisect-measure", "sometimes"], "argument --bisect-measure: invalid choice: 'sometimes'"),
        (["fleet", "status", "--redis", "redis://[::1"], "--redis redis://[::1: Invalid IPv6 URL"),
        (["fleet", "local", "--store", "/proc/redline.db"], "store /proc/redline.db: cannot be created"),
        (["fleet", "local", "--claim-idle", "1s"], "'1s' is shorter than 2s, the shortest allowed"),
        (["collector", "--store", tmp / "c.db", "--bisect-history", "maybe"],
         "argument --bisect-history: invalid choice: 'maybe' (choose from 'on', 'off')"),
        (["fleet", "local", "--store", tmp / "f.db", "--bisect-history", "yes"],
         "argument --bisect-history: invalid choice: 'yes'"),
        (["fleet", "local", "--port", "0"], "expected a positive integer"),
        (["fleet", "local", "--store", tmp / "f.db", "--export", "redis://[::1"], "--export redis://[::1: not a URL"),
        (["fleet", "local", "--allow-targets-file", tmp / "none"], f"--allow-targets-file {tmp}/none: No such file"),
    ]


def test_every_subcommand_refuses_malformed_arguments_in_one_line_before_anything_starts(tmp_path, redline_cli):
    _suite_with(tmp_path, "good")
    failures, cases = [], _malformed(tmp_path)
    # each is refused before it starts anything, so no two meet: a hundred command lines, each in a
    # process of its own forked from one that imported redline once (tests/cli_forks.py)
    answers = run_many([arguments for arguments, _ in cases], tmp_path)
    # and one as a user runs it, from Python's start
    answers[0] = redline_cli(*cases[0][0])
    for (arguments, fragment), proc in zip(cases, answers):
        lines = proc.stderr.splitlines()      # exactly one line: no plan, no blank line, no wrapping
        if proc.returncode != 2 or len(lines) != 1 or not lines[0].startswith("redline: error: ") \
                or fragment not in proc.stderr or "Traceback" in proc.stderr:
            failures.append((arguments, proc.returncode, proc.stderr[-600:]))
    assert not failures, failures
    assert not (tmp_path / "redline.db").exists()          # no store session was opened, nothing measured
    assert not (tmp_path / "same.out").exists()
    assert not (tmp_path / "accuracy.db").exists()
    for written in ("agent.db", "c.db", "f.db"):           # nor a fleet command's store
        assert not (tmp_path / written).exists(), written
    commands = {arguments[0] if arguments[0] != "fleet" else " ".join(arguments[:2]) for arguments, _ in cases}
    from redline.cli import COMMANDS
    assert commands >= {*COMMANDS, "fleet status", "fleet local"} - {"fleet"}, "a subcommand has no malformed case"


def test_brackets_in_a_test_name_or_a_server_reply_are_printed_as_text(tmp_path, redline_cli):
    suites = tmp_path / "suites"
    suites.mkdir()
    markup = write_suite(suites, "a-markup", '--command "OBJECT [/x] __key__" -c 1 -t 1 --test-time 1')
    markup.write_text(markup.read_text().replace("name: a-markup", 'name: "[/bold] a-markup [red] \\e[2J"'))
    write_suite(suites, "b-after", "--ratio 1:0 -c 1 -t 1 --test-time 1")
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    runs = {r["test"]: r for r in json.loads(out.read_text())}
    name = "[/bold] a-markup [red] \x1b[2J"                         # the suite's own name, in the results
    assert runs[name]["status"] == "ok" and runs["b-after"]["status"] == "ok"
    reply = next(f for f in runs[name]["flags"] if "error replies" in f)
    assert "ERR unknown subcommand '[/x]'" in reply
    shown = "[/bold] a-markup [red] \\x1b[2J"                      # on the terminal: the escape as text
    assert f"[1/2] {shown}" in proc.stderr and reply in proc.stderr
    assert shown in proc.stdout and "[/x]" in proc.stdout           # results table and its notes
    assert "\x1b" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_tables_of_user_text_render_literally_on_the_terminal_console():
    from rich.table import Table
    from redline.core import terminal
    from redline.core.run import Run
    from redline.output.tables import results_table
    record = Run(test="[/bold] t [dim]", target="bin:/x [/y]", side=None, run_index=0, status="ok",
                 metrics={"ops_per_sec": 1.0}, flags=["[/z] flag"])
    table, notes = results_table([record])
    console = terminal.console(width=200, record=True)
    console.print(table)
    for note in notes:
        console.print(note)
    legend = Table(title="[/title]")
    legend.add_column("[/column]")
    legend.add_row("[/cell]")
    console.print(legend)
    console.print(terminal.styled("[/plain] ", ("[/styled]", "red")))
    from redline.analysis.comparison import TestComparison
    from redline.output import verdicts
    console.print(verdicts.terminal_table([TestComparison("[/verdict] t", "ops_per_sec", None,
                                                                note="[/note] too few runs")], width=200))
    text = console.export_text()
    for literal in ("[/bold] t [dim]", "[/z] flag", "[/title]", "[/column]", "[/cell]", "[/plain] [/styled]",
                    "[/verdict] t", "[/note] too few runs"):
        assert literal in text, literal


@pytest.mark.parametrize("spelling", [["-S", "/s"], ["-S/s"], ["--unix-socket", "/s"], ["--unix-socket=/s"],
                                      ["--unix-sock", "/s"]])
def test_an_owned_option_is_dropped_in_every_spelling(tmp_path, spelling):
    request = LoadRequest(["--pipeline", "4", *spelling, "-c", "2"], "127.0.0.1", 7000, tmp_path / "j.json")
    argv = request.argv()[1:]
    assert argv[:4] == ["--pipeline", "4", "-c", "2"] and "/s" not in argv and "-S/s" not in argv
    combined = LoadRequest(["-RS/s", "--ratio", "1:0"], "127.0.0.1", 7000, tmp_path / "j.json").argv()[1:]
    assert combined[:3] == ["--ratio", "1:0", "--random-data"] and "/s" not in " ".join(combined)


def test_the_output_check_truncates_nothing_and_leaves_nothing_behind(tmp_path):
    kept = tmp_path / "kept.json"
    kept.write_text("earlier results")
    check_output_paths({"--json": kept, "--markdown": tmp_path / "new.md", "--other": None})
    assert kept.read_text() == "earlier results" and not (tmp_path / "new.md").exists()
    with pytest.raises(UsageError, match="no-dir/x.json: cannot write there"):
        check_output_paths({"--json": tmp_path / "no-dir" / "x.json"})


def test_a_suites_own_measure_instructions_without_valgrind_is_refused_before_anything_starts(tmp_path, redline_cli):
    """A suite saying `redline: measure: instructions` on a machine without valgrind (a PATH that
    holds redis-server only): one line and exit 1 before a server starts or the store is made."""
    from redline.suites.discovery import builtin_suites_dir
    suite = tmp_path / "counted.yml"
    suite.write_text((builtin_suites_dir() / "quick" / "string-get-100B-pipeline-1.yml").read_text()
                     + "redline:\n  measure: instructions\n")
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "redis-server").symlink_to("/usr/bin/redis-server")
    import os
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "redline.cli", "run", suite, "--store", tmp_path / "r.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": str(bare)})
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == ["redline: error: valgrind is not installed (needed by --measure "
                                        "instructions): run `bash setup.sh`"]
    assert not (tmp_path / "r.db").exists()

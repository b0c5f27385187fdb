"""`redline show`: a stored session rendered again is what its command showed and wrote when it
ended — the terminal tables, the --json document, the --markdown comment — because every output
renders the one stored session document (a real compare on Debian's redis-server)."""

import subprocess

from conftest import REDLINE


def redline(*args, cwd):
    done = subprocess.run([*REDLINE, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_show_gives_again_what_compare_gave(tmp_path):
    printed = redline("compare", "--comparison-config", "appendonly=yes", "--name", "set-sadd", "--runs", "2",
                      "--max-runs", "2", "--duration", "1s", "--warmup", "0s", "--store", "s.db", "--json", "c.json",
                      "--markdown", "c.md", cwd=tmp_path)
    assert "redline compare" in printed
    assert redline("show", "--store", "s.db", cwd=tmp_path) == printed
    assert redline("show", "1", "--format", "json", "--store", "s.db", cwd=tmp_path) == (tmp_path / "c.json").read_text()
    redline("show", "latest", "--format", "markdown", "-o", "again.md", "--store", "s.db", cwd=tmp_path)
    assert (tmp_path / "again.md").read_text() == (tmp_path / "c.md").read_text()


def test_show_refuses_what_is_not_there(tmp_path):
    done = subprocess.run([*REDLINE, "show", "7", "--store", str(tmp_path / "none.db")], capture_output=True, text=True)
    assert done.returncode == 2 and "no result store" in done.stderr

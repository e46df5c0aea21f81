"""One voice: the library logs through ``logging.getLogger("reportfed")`` and prints nothing of
its own; the command line shows that log on stderr (notes as they are, warnings as
``reportfed: warning:`` lines), and a library user silences or redirects it with ``logging``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_library_user_redirects_or_silences_reportfeds_log(
    processes: None, tmp_path: Path
) -> None:
    port = _closed_port()
    script = tmp_path / "user.py"
    script.write_text(
        "import logging, sys\n"
        "from reportfed.core.errors import ReportfedError\n"
        "from reportfed.flower.processes import wait_for_server\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(name)s| %(message)s')\n"
        "for level in (logging.INFO, logging.WARNING):\n"
        "    logging.getLogger('reportfed').setLevel(level)\n"
        "    try:\n"
        f"        wait_for_server('127.0.0.1:{port}', 1.0)\n"
        "    except ReportfedError:\n"
        "        print('refused')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"reportfed.flower.processes| waiting up to 1 s for the server at 127.0.0.1:{port}",
        "refused",
        "refused",  # silenced at WARNING
    ]
    assert done.stderr == ""  # nothing printed behind the user's back


def test_the_command_line_shows_the_librarys_notes_on_stderr(
    processes: None, tmp_path: Path
) -> None:
    port = _closed_port()
    done = subprocess.run(
        ["reportfed", "federation", "run", "--insecure", "--superlink", f"127.0.0.1:{port}",
         "--connect-timeout", "1", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert f"waiting up to 1 s for the server at 127.0.0.1:{port}" in lines
    assert lines[-1].startswith(
        f"reportfed: error: no server accepts connections at 127.0.0.1:{port}"
    )

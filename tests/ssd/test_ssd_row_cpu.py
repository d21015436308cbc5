"""CPU: ``scripts/ssd-row`` (a suite row's call for a profiler) starts, and its row call is the trace scripts' own."""
import pathlib
import subprocess
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def test_ssd_row_help():
    out = subprocess.run([sys.executable, str(SCRIPTS / "ssd-row"), "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ROW" in out.stdout or "row" in out.stdout


def test_ssd_row_uses_the_trace_scripts_row_call():
    text = (SCRIPTS / "ssd-row").read_text()
    assert "from ssd_trace import suite_call" in text
    assert "suite_call(row, stream)" in (SCRIPTS / "ssd_trace.py").read_text()

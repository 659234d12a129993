"""`make bench`: run every benchmark script in bench/ (each writes its table into build/bench/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
failed = []
for script in sorted(HERE.glob("*.py")):
    # the classroom's bench needs a room and has a target of its own (make bench-classroom); the
    # stability bench runs the whole course four times (make bench-stability, about 45 minutes)
    if script.name in ("run_all.py", "common.py", "classroom.py", "stability.py"):
        continue
    print(f"== {script.name}", flush=True)
    if subprocess.run([sys.executable, str(script)]).returncode != 0:
        failed.append(script.name)
print(f"benchmarks done; tables in {HERE.parent / 'build' / 'bench'}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
sys.exit(1 if failed else 0)

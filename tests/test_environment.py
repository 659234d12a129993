"""environment.yml (for conda users) and pyproject.toml (what .venv installs) list the same packages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(spec: str) -> str:
    return re.split(r"[=<>!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pins(specs) -> dict[str, str]:
    out = {}
    for s in specs:
        m = re.match(r"^([A-Za-z0-9_.\-]+)\s*==?\s*([^\s;]+)$", s.strip())
        if m:
            out[_name(m.group(1))] = m.group(2)
    return out


def test_environment_yml_matches_pyproject():
    """Do environment.yml and pyproject.toml pin the same packages at the same versions?"""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    py_specs = project["dependencies"] + project["optional-dependencies"]["test"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = [], []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += [d for d in dep["pip"] if not d.startswith("-")]
        elif _name(dep) not in ("python", "pip"):
            conda.append(dep)
    assert _pins(py_specs) == _pins(conda + pip)
    assert all("==" in s for s in py_specs), "every Python dependency is pinned"

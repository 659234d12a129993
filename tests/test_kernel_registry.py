"""The kernel registry (hpclab/kernels/registry.py): a kernel is one unit.

Adding a kernel means a folder in src/, a template in slurm-templates/ and one module in
hpclab/kernels/; these tests check that the registry, the spec model and the folders agree, and
that no other list of kernel names creeps back into the package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.kernels.registry import Kernel, KernelArgs
from hpclab.spec.model import Spec, make_spec

NAMES = registry.names()
C_KERNELS = tuple(n for n in NAMES if registry.get(n).contract)  # the C kernels of src/
RUNS = Path(__file__).parent / "data" / "runs"


def test_registry_lists_exactly_the_kernels_with_a_source_folder_and_a_template():
    """Is every src/<name>/ folder that has a slurm-templates/<name>.sh.j2 a registered kernel,
    and does every registered kernel have both (src/common, src/mpitrace are not kernels)?"""
    src = paths.repo() / "src"
    with_template = {d.name for d in src.iterdir()
                     if d.is_dir() and (paths.templates_dir() / f"{d.name}.sh.j2").is_file()}
    assert set(C_KERNELS) == with_template
    for kernel in registry.kernels():
        # a kernel that runs the spec's own command (program) has a template but no source
        assert (src / kernel.source).is_dir() if kernel.contract else kernel.source == "", kernel.name
        assert (paths.templates_dir() / kernel.template).is_file(), kernel.name


def test_spec_accepts_exactly_the_registered_kernels():
    """Does the spec model take its `kernel:` choices and args models from the registry?"""
    for name in NAMES:
        spec = make_spec(kernel=name, ntasks=2, **({} if name in C_KERNELS else {"command": ["/bin/true"]}))
        assert isinstance(spec.args, registry.get(name).args)
        assert spec.args.kernel == name
    assert set(Spec.model_json_schema()["properties"]["kernel"]["enum"]) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_args_model_rejects_unknown_arguments(name):
    """Does each kernel's args model refuse an argument it does not know, both on its own and in
    a spec, where the error names the field and the fields allowed there?"""
    model = registry.get(name).args
    assert issubclass(model, KernelArgs)
    with pytest.raises(ValidationError, match="no_such_arg"):
        model.model_validate({"no_such_arg": 1})
    with pytest.raises(HpclabError, match=r"args\.no_such_arg: unknown field") as err:
        make_spec(kernel=name, ntasks=2, args={"no_such_arg": 1})
    allowed = [f for f in model.model_fields if f != "kernel"]
    assert all(f in err.value.hint for f in allowed)


def test_unknown_kernel_gives_a_clear_error():
    """Does an unknown kernel name raise an HpclabError that lists every known kernel, from the
    registry, the spec and the run-folder parser alike?"""
    with pytest.raises(HpclabError) as err:
        registry.get("hpl")
    assert "unknown kernel 'hpl'" in str(err.value)
    assert all(name in str(err.value) for name in NAMES)
    assert "hpclab/kernels/" in err.value.hint
    with pytest.raises(HpclabError, match="kernel"):
        make_spec(kernel="hpl")
    from hpclab.runs.parse import parse_run

    with pytest.raises(HpclabError, match="unknown kernel 'hpl'"):
        parse_run(RUNS, "hpl")


@pytest.mark.parametrize("name", C_KERNELS)
def test_every_kernel_reads_a_captured_run(name):
    """Does each registered kernel's JSON parser turn a captured run of it into a non-empty
    table (tests/data/runs/<kernel>-*)? (program has no output contract: tests/test_program.py)"""
    from hpclab.kernels.contract import load_result

    runs = sorted(RUNS.glob(f"{name}-*/result.json"))
    assert runs, f"no captured run of {name} in {RUNS}"
    table, extra = registry.get(name).table(load_result(runs[0], kernel=name), str(runs[0]))
    assert len(table) > 0 and isinstance(extra, dict)


def test_register_refuses_an_args_model_for_another_kernel():
    """Does registering a kernel whose args model names a different kernel fail with a message
    saying which field is wrong (the spec picks the model by that field)?"""
    with pytest.raises(HpclabError, match="kernel: Literal"):
        registry.register(Kernel(name="not-stream", args=registry.get("stream").args,
                                 table=registry.get("stream").table))
    assert "not-stream" not in registry.names()


def _literal_name_lists(tree: ast.AST) -> list[int]:
    """Line numbers of tuple/list/set literals that hold two or more kernel names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(words & set(NAMES)) >= 2:
                found.append(node.lineno)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id == "Literal" and isinstance(node.slice, ast.Tuple):
            words = {e.value for e in node.slice.elts if isinstance(e, ast.Constant)}
            if len(words & set(NAMES)) >= 2:
                found.append(node.lineno)
    return found


def test_no_second_list_of_kernel_names_in_the_package():
    """Is the registry the only list of kernels: no module of hpclab spells out two or more
    kernel names in one tuple, list, set or Literal (an if/elif dispatch on names included)?"""
    offenders = []
    for path in sorted(paths.package_dir().rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text, str(path))
        rel = path.relative_to(paths.package_dir().parent)
        offenders += [f"{rel}:{line}" for line in _literal_name_lists(tree)]
        for m in re.finditer(r"kernel == [\"'](\w+)[\"']", text):
            if m.group(1) in NAMES:
                offenders.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1} (kernel == ...)")
    assert not offenders, "kernel names listed outside hpclab/kernels: " + ", ".join(offenders)

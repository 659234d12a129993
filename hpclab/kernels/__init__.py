"""The kernels floor: what each C kernel under src/ is to the Python side.

One module per kernel (pingpong.py, stream.py, poisson.py) holds its argument model, the
parsers of its output and its checks on a spec, and registers them (registry.register).
program.py is the kernel of any program of the user's (`kernel: program`, `command: [...]`): no
source here, no output contract; its results are its trace and its output. The
output contract every kernel shares (arguments, banner, `key = value` block, validation line,
JSON envelope) is contract.py. Everything above asks the registry:

    from hpclab.kernels import registry
    registry.names()            # ("pingpong", "poisson", "program", "stream")
    registry.get("stream")      # Kernel(name, args, table, text, check, template, binary, source,
                                #        command, problems)

Adding a kernel: its folder in src/, its slurm-templates/<name>.sh.j2 and one module here.
"""

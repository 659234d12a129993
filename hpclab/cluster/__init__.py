"""The local Slurm cluster the course starts on this machine (the embedded default site).

    from hpclab import cluster
    cluster.up(); print(cluster.status().render()); cluster.down()
"""

from hpclab.cluster.local import down, env_script, node_states, slurm_env, status, up

__all__ = ["up", "down", "status", "slurm_env", "env_script", "node_states"]

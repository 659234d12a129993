"""The fake Slurm of the experiment-path tests: see fakeslurm.py."""

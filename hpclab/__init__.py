"""hpclab: an executable HPC course.

The package holds every piece of logic the notebooks and labs use: the local Slurm cluster,
experiment specs and job templates, run folders, parsers, trace analysis and plots.
"""

__version__ = "0.1.0"

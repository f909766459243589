"""``topoagent audit``: whether the processes using each GPU run where their GPU is.

:mod:`.read` finds the GPU users (NVML's running processes, else open device nodes read as
links) and reads their threads' affinity, ``numa_maps`` and a few ``environ`` variables
through the one reader; :mod:`.parse` holds the pure parsers; :mod:`.advise` judges them
against the scan (findings in :mod:`.codes`); :mod:`.render` writes the table or JSON;
:mod:`.command` is the CLI.  The daemon exports the same audit per GPU.
"""

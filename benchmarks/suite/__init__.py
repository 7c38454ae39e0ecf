"""The benchmark suite behind ``benchmarks/run.py``, one module per job.

Runs in the parent process only (workers are the contenders' own). Each
module imports only the modules listed above it (tests/test_benchmarks.py
checks it)::

    console     rich tables and progress, or plain lines
    machine     the machine's facts: CPU, memory, cores, versions, commit
    envs        the environments: specs, the picklable factory, actions
    measure     timing a session, medians and spread, the copy and wake floors
    contenders  the peers and vecenv's layouts: how each is built and stepped
    results     the cells and results of the JSON: recording and looking up
    targets     the project's targets, evaluated from a run's own ratios
    plots       the PNGs
    report      the tables, the Markdown summary, the conclusion, the files
    command     the command line, the loop over cells, estimate and ETA

``benchmarks/ray_overhead.py`` uses :mod:`suite.machine`,
``benchmarks/multi_agent.py`` that and :mod:`suite.contenders` (the layouts to
try); :mod:`suite.command` runs ``multi_agent`` after the default suite.
"""

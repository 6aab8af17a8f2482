"""``dsbench soak``: train for a long time and watch what a short benchmark cannot see, memory
and step time that creep upward, losses that go wrong, and, with injected faults, whether every
failure is detected and named and every restart continues the job bit for bit.

- :mod:`dsbench.soak.plan`: the ``--faults`` and ``--duration`` specs and the seeded schedule;
- :mod:`dsbench.soak.run`: the launches of the ranks (``dsbench train``'s machinery), the fault
  injection, the restarts from the latest checkpoint, the JSONL stream;
- :mod:`dsbench.soak.report`: drift fits, loss anomalies and fault outcomes as result rows.
"""

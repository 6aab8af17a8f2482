"""What the published site says, as data: the comparisons (:mod:`.axes`) and the runs each pairs
with their verdicts' texts (:mod:`.pairings`), claims and their checks (:mod:`.claims`), soaks
(:mod:`.soaks`, :mod:`.soak_claims`), sweeps (:mod:`.series`), modelled figures (:mod:`.floors`,
:mod:`.modelled`, the profiles' matrix :mod:`.families`), the reference runs' manifest
(:mod:`.manifest`) and small facts about runs (:mod:`.facts`). Nothing here imports markup or
plotting, or the pages (``tests/test_imports.py``): the pages (:mod:`dsbench.publish.pages`) are
views over it.
"""

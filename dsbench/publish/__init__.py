"""``dsbench publish``: result files (dsbench's and asv's) to a static, offline HTML site.

- :mod:`dsbench.publish.site`: the pages (index, comparisons, runs, profiles, claims) and plots;
- :mod:`dsbench.publish.modelled`: roofline floors and alpha-beta estimates per hardware profile
  (modelled, never mixed with measured numbers);
- :mod:`dsbench.publish.claims`: published tables to check (``results/claims/*.toml``).
"""

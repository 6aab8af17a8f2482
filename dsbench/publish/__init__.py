"""``dsbench publish``: result files (dsbench's and asv's) to a static, offline HTML site.

- :mod:`dsbench.publish.data`: what the site says, computed from the runs: the comparisons and
  their pairings, claims and their verdicts, soaks, modelled figures; no markup, no plotting;
- :mod:`dsbench.publish.pages`: one view module per page over that data;
- :mod:`dsbench.publish.html`, :mod:`~dsbench.publish.tables`, :mod:`~dsbench.publish.plots`:
  markup, the CSV beside each table, the charts;
- :mod:`dsbench.publish.site`: :class:`~dsbench.publish.site.Site`, which writes the files;
- :mod:`dsbench.publish.build`: the builder (:func:`~dsbench.publish.build.publish`).
"""

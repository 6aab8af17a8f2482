"""One view module per page of the site, over :mod:`dsbench.publish.data`; each writes through
:class:`dsbench.publish.site.Site`, and :mod:`dsbench.publish.build` calls them in order."""

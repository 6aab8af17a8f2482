"""Measuring: the timing core (:mod:`.timing`), peak memory (:mod:`.memory`) and the suite runner
(:mod:`.runner`) that turns benchmark definitions into result rows."""

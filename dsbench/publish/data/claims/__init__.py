"""Claims: published tables of numbers (blog posts, release notes) to check against dsbench.

A claim file is TOML in ``results/claims/`` — one published table (or list) per file, in the
format of [Note: the claim file format]. It is never a result: the results loader skips the
folder, and nothing here turns a claim into a measurement. :func:`check` sets each claim beside
what dsbench *measured* (result files, through :mod:`dsbench.compare`'s selectors) or, failing
that, *modelled* (:mod:`dsbench.publish.data.modelled`), or says which command would measure it.

A ``soak`` mapping puts the claim in the stability table (:mod:`.stability_claims`)
beside what each matching soak measured: a row's value (``value``), the ± half-range of a memory
series after warm-up (``range``), the drift verdicts (``verdict``), the steps trained
(``steps``) or the failures nobody injected over the hours trained (``failures``). It decides
nothing: a soak of minutes is not the claim's run, and the table says what was run.

Values are numbers as printed; a ``qualifier`` (``~ > >= < <= ±``) keeps what the number alone
loses. ``claimed_ratio`` defaults to contender / baseline when both values are plain numbers.

The parts: :mod:`.data` (the claim dataclasses and the format's constants), :mod:`.load`
(reading and validating claim files: :func:`load_claims`, :func:`load_claim_file`) and
:mod:`.verdicts` (checking claims against measured and modelled numbers: see the Note
there, [Note: claims and verdicts]); :mod:`.checked`: a results folder's claims, each beside
its check (:func:`check_folder`).
"""

from dsbench.publish.data.claims import checked, data, load, verdicts
from dsbench.publish.data.claims.checked import *  # noqa: F403
from dsbench.publish.data.claims.data import *  # noqa: F403  (re-exported)
from dsbench.publish.data.claims.load import *  # noqa: F403
from dsbench.publish.data.claims.verdicts import *  # noqa: F403

__all__ = [*data.__all__, *load.__all__, *verdicts.__all__, *checked.__all__]

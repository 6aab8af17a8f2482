"""Claims: published tables of numbers (blog posts, release notes) to check against dsbench.

A claim file is TOML in ``results/claims/`` — one published table (or list) per file. It is
never a result: the results loader skips the folder, and nothing here turns a claim into a
measurement. :func:`check` sets each claim beside what dsbench *measured* (result files, through
:mod:`dsbench.compare`'s selectors) or, failing that, *modelled* (:mod:`dsbench.publish.modelled`),
or says which command would measure it.

Format (``schema_version = 1``)::

    schema = "dsbench-claims"
    schema_version = 1
    title = "2.2 性能对比实测数据"            # as printed
    title_en = "2.2 Measured performance"    # optional translation
    language = "zh-CN: ..."                  # what is quoted and what is translated

    [source]                                 # file and section required; article, article_en,
    file = "000_....txt"                     # url, quote optional
    section = "2.2 ..."

    [scenario]                               # as the source states it: hardware, software,
    hardware = "4×NVIDIA A100 80GB"          # model, config, as_stated (any string fields)

    [[claims]]
    id = "bert-large-training"               # [a-z0-9-], unique in the file
    label = "BERT-large训练"                  # as printed; label_en optional
    form = "table"                           # table (default) | list | prose
    metric = "training throughput"
    unit = "samples/s"
    direction = "higher"                     # higher | lower is better
    baseline = { label = "...", text = "128 samples/sec", value = 128 }
    contender = { label = "...", text = "138 samples/sec", value = 138, qualifier = "~" }
    claimed_change = "+7.8%"                 # as printed (optional)
    claimed_ratio = 1.078                    # optional: contender / baseline where the source
    claimed_range = [0.98, 1.02]             #   gives no values ("about 15% slower"), or a
    ratio_basis = "how the ratio was read"   #   range ("within 2%"); say how it was read
    quote, note, scenario = { ... }          # optional; scenario fields override the file's

    [claims.dsbench]                         # how dsbench would measure it ...
    benchmark = "train_step"                 # a benchmark name
    params = { model = "bert-large" }        # parameter pattern: value or list of values
    metric = "samples_per_s"                 # default: the benchmark's primary metric
    field = "value"                          # value | pct_of_peak | memory.<key>
    baseline = "0.18.3"                      # dsbench compare selectors
    contender = "0.18.4"
    run = ["dsbench run ..."]                # commands that produce the two runs (optional)
    modelled = { params = {...}, baseline_profile = "...", contender_profile = "..." }
    note = "..."
    # ... or why it cannot:
    not_measurable = "dsbench does not run 72-hour jobs"

    [claims.dsbench.soak]                    # optional, with either: what dsbench soak shows
    show = "range"                           # value | range | verdict | steps | failures
    row = ["soak.device_reserved", "soak.memory"]  # the first of these rows a soak has
    params = { stage = 3 }                   # soak parameter pattern (optional)
    note = "..."

A ``soak`` mapping puts the claim in the stability table (:mod:`.stability_claims`)
beside what each matching soak measured: a row's value (``value``), the ± half-range of a memory
series after warm-up (``range``), the drift verdicts (``verdict``), the steps trained
(``steps``) or the failures nobody injected over the hours trained (``failures``). It decides
nothing: a soak of minutes is not the claim's run, and the table says what was run.

Values are numbers as printed; a ``qualifier`` (``~ > >= < <= ±``) keeps what the number alone
loses. ``claimed_ratio`` defaults to contender / baseline when both values are plain numbers.

The parts: :mod:`.data` (the claim dataclasses and the format's constants), :mod:`.load`
(reading and validating claim files), :mod:`.verdicts` (checking claims against measured and
modelled numbers, see [Note: claims and verdicts] there).
"""

from dsbench.publish.claims import data, load, verdicts
from dsbench.publish.claims.data import *  # noqa: F403  (re-exported)
from dsbench.publish.claims.load import *  # noqa: F403
from dsbench.publish.claims.verdicts import *  # noqa: F403

__all__ = [*data.__all__, *load.__all__, *verdicts.__all__]

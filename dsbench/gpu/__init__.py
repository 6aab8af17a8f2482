"""The GPU box: ``dsbench gpu-check`` (:mod:`.check`), its ceilings process (:mod:`.ceilings`) and
``dsbench verify-gpu`` (:mod:`.verify`)."""

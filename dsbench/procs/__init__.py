"""Processes and the host: spawning ranks (:mod:`.distributed`), SIGTERM and SIGINT
(:mod:`.interrupts`), injected faults (:mod:`.faults`) and what this host allows (:mod:`.host`)."""

"""The ``wikidrift`` application: the command line over the library (:mod:`pipeline`) and the
Prefect flows (:mod:`flows`). Kept apart from both so the library never imports the flows."""

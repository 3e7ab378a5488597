"""The BatchJob status: the record and its wire form (``record``), the stored fields read back
(``stored``), usage, transfers, the tasks aggregated into a phase (``aggregate``), the life of
an attempt (``lifecycle``), its waits before anything is sent (``unsent``) and what it saw of
the BatchJobs it depends on (``dependencies``).
"""

"""The BatchJob status: the record and its wire form (``record``), the stored fields read back
(``stored``), usage, transfers, the tasks aggregated into a phase (``aggregate``) and the life
of an attempt (``lifecycle``).
"""

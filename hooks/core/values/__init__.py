"""The values every floor of the core shares: phases and task observations, the typed reasons, the
job request, the storage and image value types, units, text, shell words and field readers, and
the scheduler SDK (``SchedulerRules``, ``SchedulerError``). The lowest floor: it imports nothing
else of the core.
"""

"""The values every floor of the core shares: phases and task observations, the typed reasons, the
job request, the storage value types, units, text and field readers, and the scheduler SDK
(``SchedulerRules``, ``SchedulerError``). The lowest floor: it imports nothing else of the core.
"""

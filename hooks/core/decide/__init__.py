"""The decisions: ``sync.decide`` and ``finalize.decide`` are generators that yield ``effects`` for
the shell to run and return the answer. Start reading at ``sync``.
"""

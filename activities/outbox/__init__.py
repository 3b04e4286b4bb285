"""The transactional outbox: notices queued in the transaction that records a slot's
event (`notices`) and the operator's view of recent messages (`messages`).
"""

"""Claim and fencing: the execution record of a slot (`executions`: claim, take over,
finish), the commit journal that evidences each fenced commit (`journal`), the pause on
repeated failure recorded with a failure (`auto_pause`), and the heartbeat kept while
waiting for a row lock (`heartbeat`).
"""

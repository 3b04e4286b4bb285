"""Slot dependencies (docs/dependencies.md): which upstream slots a slot waits for and the
judgement of a wait (`judge`, pure), and the wait's activities (`upstream`).
"""

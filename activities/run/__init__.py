"""A job's run as a whole: what a job kind is and how each kind becomes what Temporal runs
(`kinds`), and the start of a run in one step (`begin`), built on the parts below.
"""

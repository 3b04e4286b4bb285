"""Runtime schedules (issue 21), the activity side: names and payloads (`models`), the
dispatcher's tick (`dispatch`, `shards`, `tenant_limits`), starting a decided slot's run
(`start`), the runs' activities (`runs`, `batch`) and the check that params name the
tenant's own resources (`ownership`).
"""

"""dscan's Celery workers: the core's shard function as tasks, results kept in Redis.

- ``workers.settings``, ``workers.store``, ``workers.logs``: the service's shared layer (settings, the Redis
  store and its key layout, task names, JSON logs). They import no Celery and no FastAPI, and are the only
  modules of this package that ``api/`` imports.
- ``workers.app``: the Celery application (``celery -A workers.app worker``).
- ``workers.tasks``: plan, shard, merge, failure and callback tasks.

Importing this package imports nothing else.
"""

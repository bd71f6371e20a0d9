"""dscan's HTTP API: FastAPI routes over the shared Redis store (``workers.store``).

``api.app.create_app(settings)`` builds the application (``uvicorn api.app:create_app --factory``);
``api.routes.ROUTERS`` lists its routers, one per resource. Importing this package imports nothing else.
"""

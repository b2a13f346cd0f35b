"""How the load is sent: plan x payloads x protocol -> one RequestRecord per request.

generator.py is the generator (open and closed loop, journeys), waker.py its exact clock, mix.py routes
requests to endpoints; executor.py splits, runs and merges the parts (LocalExecutor: this process),
processes.py and ray_executor.py run them in processes or Ray actors, clocksync.py measures a remote clock's
offset."""

"""How Engram's ASGI server is run: uvicorn on uvloop with httptools (``uvicorn[standard]``).

On asyncio's own event loop a request waited about 40 ms longer at one client (recall p50 68 ms
against 28 ms over HTTP with httptools both ways; README, Speed and memory); the HTTP parser
made no difference. ``scripts/dev`` and ``scripts/bench`` pass the same flags (``tests/test_serving.py``
checks that they do).
"""

UVICORN_FLAGS = ("--loop", "uvloop", "--http", "httptools")

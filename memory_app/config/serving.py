"""How Engram's ASGI server is run: uvicorn on uvloop with httptools (``uvicorn[standard]``).

On asyncio's own event loop a request waited about 40 ms longer at one client (recall p50 68 ms
against 27 ms over HTTP, the same server otherwise; README, Speed and memory), whatever the HTTP
parser. ``scripts/dev`` and ``scripts/bench`` pass the same flags (``tests/test_serving.py``
checks that they do).
"""

UVICORN_FLAGS = ("--loop", "uvloop", "--http", "httptools")

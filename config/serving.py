"""How Engram's ASGI server is run: uvicorn on uvloop with httptools (``uvicorn[standard]``).

On asyncio's own event loop a request waited about 40 ms longer at one client (recall p50 68 ms
against 28 ms over HTTP with httptools both ways; README, Speed and memory); the HTTP parser
made no difference. ``scripts/dev`` and ``scripts/bench`` pass the same flags (``tests/config/test_serving.py``
checks that they do).
"""

UVICORN_FLAGS = ("--loop", "uvloop", "--http", "httptools")


def malloc_arenas_limit(arenas: int) -> None:
    """Cap glibc's malloc arenas for this process (0: glibc's default). Each thread that allocates
    gets an arena of its own, up to eight per core, and memory freed in one stays there: a server's
    dozens of request threads hold far more than they use. Call it before the threads start; a
    no-op on other C libraries."""
    if arenas > 0 and (libc := _glibc()) is not None:
        libc.mallopt(_M_ARENA_MAX, arenas)


def malloc_release() -> None:
    """Give freed heap memory back to the system (after loading models, whose building blocks are
    freed once the session holds its own copy)."""
    if (libc := _glibc()) is not None:
        libc.malloc_trim(0)


_M_ARENA_MAX = -8  # glibc's mallopt parameter number


def _glibc():
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None

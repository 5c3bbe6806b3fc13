"""Test helper: run a function on several threads at once and collect what they raised."""

import threading


def run_on_threads(target, count: int, timeout: float = 120) -> list:
    """Call ``target(i)`` for i < count, each on its own thread; wait for all of them. Returns
    the exceptions they raised; AssertionError when one is still running after ``timeout``
    seconds (a deadlock)."""
    errors = []

    def guarded(i):
        try:
            target(i)
        except Exception as error:  # noqa: BLE001 - handed back to the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread did not finish"
    return errors

"""Progress across a whole plan: runs done/total, elapsed, ETA and what is running, at every start and end and at
least every 30 s, so that a plan of hours says where it is."""
from __future__ import annotations

import threading
import time
from typing import Callable, Protocol, Sequence

PROGRESS_EVERY_S = 30.0
ETA_PRIOR_S = 1800.0  # how many seconds of runs must end before their pace outweighs the declared estimates


class Item(Protocol):
    """What progress needs of a planned run (studies.runner.Planned)."""

    name: str
    done: bool
    run: object


class Progress:
    """Prints the plan's progress (runs done/total, elapsed, ETA, what is running) at least every 30 s; safe to
    call from the threads of a plan run with --jobs."""

    def __init__(self, items: Sequence[Item], say: Callable[[str], None] = print,
                 every_s: float = PROGRESS_EVERY_S):
        todo = [i for i in items if not i.done]
        self.total, self.finished = len(todo), 0
        self.estimate_left = sum(i.run.cost_s for i in todo)
        self.estimate_done = self.actual_done = 0.0
        self.start = time.monotonic()
        self.running: dict[str, tuple[float, float]] = {}  # name -> (started, estimate)
        self.say, self.every_s = say, every_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self.say(self.line())

    def started(self, item: Item) -> None:
        with self._lock:
            self.running[item.name] = (time.monotonic(), item.run.cost_s)
            number = self.finished + len(self.running)
        self.say(f"[{number}/{self.total}] {item.name}: running (estimate {clock(item.run.cost_s)})")

    def skipped(self, item: Item) -> None:
        """A run that will not start (a run it reads failed): off the total and the estimate."""
        with self._lock:
            self.total -= 1
            self.estimate_left -= item.run.cost_s

    def ended(self, item: Item, seconds: float) -> None:
        with self._lock:
            self.finished += 1
            self.estimate_left -= item.run.cost_s
            self.estimate_done += item.run.cost_s
            self.actual_done += seconds
            self.running.pop(item.name, None)
        self.say(self.line())

    def line(self) -> str:
        """'runs 3/12 done | elapsed 5m10s | ETA 12m30s | running table8/x for 2m' (ETA: the estimates left,
        scaled by how long the finished runs took against their estimates, less what the running runs have done;
        with --jobs the estimates are still summed, an upper bound)."""
        now = time.monotonic()
        with self._lock:
            # Shrunk towards 1: a few set-up runs far off their estimates say little about the long runs' pace.
            ratio = (self.actual_done + ETA_PRIOR_S) / (self.estimate_done + ETA_PRIOR_S)
            running = {name: (now - began, cost) for name, (began, cost) in self.running.items()}
            eta = (self.estimate_left - sum(c for _, c in running.values())) * ratio + \
                sum(max(cost * ratio - spent, 0.0) for spent, cost in running.values())
            text = f"runs {self.finished}/{self.total} done | elapsed {clock(now - self.start)} | ETA {clock(eta)}"
        return text + "".join(f" | running {name} for {clock(spent)}" for name, (spent, _) in running.items())


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s" if rest >= 60
            else f"{rest}s")

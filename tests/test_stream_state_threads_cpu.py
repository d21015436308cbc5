"""The per-stream state registry under threads: a call in another thread may look a state up (reordering the LRU), add a
validated handle or drop a collected stream's state at any moment of ``release_stream`` / ``forget_handle`` /
``_drop_dead``. Each test makes that other thread act at the racing moment, deterministically (a key whose comparison
acts as the other thread, a list whose last key is taken first)."""
import pytest

pytest.importorskip("cupy")

from cake_rt.launch import streams  # noqa: E402


class _ActingHandle(int):
    """A handle whose comparison runs ``act`` once: another thread acting while the caller iterates its keys."""

    def __new__(cls, value, act):
        h = super().__new__(cls, value)
        h.act = act
        return h

    def __eq__(self, other):
        act, self.act = self.act, None
        if act is not None:
            act()
        return int(self) == other

    __hash__ = int.__hash__


def test_release_stream_while_another_thread_looks_a_state_up(monkeypatch):
    states = streams.GuardedLRU(8)
    monkeypatch.setattr(streams, "_states", states)
    keep = (0, 0x5000, 0)
    states.put(keep, streams.StreamState(keep, 0x5000))
    racing = (0, _ActingHandle(0x6000, lambda: states.get(keep)), 0)  # the lookup moves `keep` to the end
    states.put(racing, streams.StreamState(racing, 0x6000))
    target = (0, 0x7000, 0)
    st = streams.StreamState(target, 0x7000)
    states.put(target, st)
    streams.release_stream(0x7000)
    assert st.retired and states.get(target) is None and states.get(keep) is not None


def test_forget_handle_while_another_thread_validates_one(monkeypatch):
    validated = {}
    monkeypatch.setattr(streams, "_validated", validated)
    validated[(0, _ActingHandle(0x6000, lambda: validated.__setitem__((0, 0x8000), 1)))] = 1  # a new handle checked
    validated[(0, 0x7000)] = 1
    streams.forget_handle(0x7000)
    assert (0, 0x7000) not in validated and (0, 0x8000) in validated


def test_a_collected_streams_state_dropped_by_two_threads_at_once(monkeypatch):
    states = streams.GuardedLRU(8)
    monkeypatch.setattr(streams, "_states", states)
    key = (0, 0x7000, 0)
    st = streams.StreamState(key, 0x7000)
    states.put(key, st)

    class TakenFirst(list):
        """The other thread pops the last key between this thread's emptiness test and its pop."""

        def pop(self, *a):
            other = super().pop(*a)
            streams.release_stream(other[1])  # what the other thread's _drop_dead does with it
            return super().pop(*a)

    monkeypatch.setattr(streams, "_dead", TakenFirst([key]))
    streams._drop_dead()
    assert st.retired and states.get(key) is None

import threading

import numpy as np
import pytest

from explorer.envs.ring import FrameRing


def frame(v, shape=(4, 5, 1)):
    return np.full(shape, v, np.uint8)


def values(t):
    return [int(x) for x in t.numpy()[:, 0, 0, 0]]


def test_latest_is_newest_k_oldest_first_across_wraparound():
    ring = FrameRing(5, (4, 5, 1))
    for v in range(1, 13):  # 12 pushes through a 5-slot ring: wraps twice
        ring.push(frame(v))
    assert ring.written == 12 and int(ring.count.numpy()) == 12
    assert values(ring.latest(3)) == [10, 11, 12]
    assert values(ring.latest(4)) == [9, 10, 11, 12]
    assert values(ring.window(4)) == [9, 10, 11, 12]
    assert ring.latest(3).dtype.name == "uint8" and ring.latest(3).shape == (3, 4, 5, 1)


def test_before_k_frames_the_first_frame_stands_in():
    ring = FrameRing(8, (4, 5, 1))
    with pytest.raises(LookupError, match="empty"):
        ring.latest(3)
    ring.push(frame(7))
    assert values(ring.latest(3)) == [7, 7, 7]
    ring.push(frame(8))
    assert values(ring.latest(3)) == [7, 7, 8]
    assert values(ring.window(5)) == [7, 8]


def test_reset_starts_a_new_episode():
    ring = FrameRing(4, (4, 5, 1))
    for v in range(6):
        ring.push(frame(v))
    ring.reset()
    ring.push(frame(99))
    assert values(ring.latest(2)) == [99, 99]


def test_bad_frames_and_sizes_are_refused():
    ring = FrameRing(4, (4, 5, 1))
    with pytest.raises(ValueError, match="uint8"):
        ring.push(np.zeros((4, 5, 1), np.float32))
    with pytest.raises(ValueError, match=r"\[4, 5, 1\]"):
        ring.push(np.zeros((5, 4, 1), np.uint8))
    with pytest.raises(ValueError):
        ring.latest(4)  # the slot being overwritten is never handed out
    with pytest.raises(ValueError):
        FrameRing(1, (4, 5, 1))


def test_one_writer_thread_many_readers_see_consecutive_frames():
    ring = FrameRing(16, (8, 8, 1))
    ring.push(frame(0, (8, 8, 1)))
    done = threading.Event()
    errors = []

    def writer():
        for v in range(1, 600):
            ring.push(frame(v % 256, (8, 8, 1)))
        done.set()

    def reader():
        while not done.is_set():
            got = ring.latest(4).numpy()
            vals = got[:, 0, 0, 0].astype(int)
            if not all(np.all(f == f.flat[0]) for f in got):
                errors.append("torn frame")
            steps = np.diff(vals) % 256
            if not np.all((steps == 1) | (steps == 0)):
                errors.append(f"out of order: {vals}")

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]
    assert ring.written == 600


@pytest.mark.parametrize("channels", [3, 1])
def test_replay_gathers_stacks_byte_for_byte_as_stack_frames_does(channels):
    from explorer.core import gather_stacked, stack_frames

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (50, 8, 6, channels), dtype=np.uint8)
    ids = rng.integers(0, 50, (7, 3))
    got = gather_stacked(frames, ids)
    assert got.shape == (7, 8, 6, 3 * channels) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, stack_frames(frames[ids]))
    # oldest first along channels: the middle frame of row 0 is channels [C, 2C)
    np.testing.assert_array_equal(got[0, ..., channels:2 * channels], frames[ids[0, 1]])

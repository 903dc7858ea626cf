"""Recorded sessions: what the agent saw and did, on disk.

- :mod:`.format`: file names, bounds, the metadata and step-line schemas, chunk files, the action layout;
- :mod:`.writer`: :class:`~.writer.Recorder` and :class:`~.writer.LoopRecorder`, crash-safe;
- :mod:`.reader`: :class:`~.reader.Session`, read lazily, and finding sessions;
- :mod:`.health`: what a session holds and lost, and the chunk check;
- :mod:`.dataset`: the ``tf.data`` pipeline of transitions;
- :mod:`.env`: :class:`~.env.SessionEnv`, sessions replayed as an :class:`~explorer.core.Env`.
"""

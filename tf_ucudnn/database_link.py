"""The engine link of the benchmark database: seeding the engine with the
stored benchmark tables of this GPU, and storing the tables this process
measured at exit.

The first convolution of a process calls :func:`load` (``tf_ucudnn.nn`` and
the graph rewrite do), which reads the database of ``UCUDNN_DATABASE``
(:func:`tf_ucudnn.database.database_path`) for the first visible GPU's model,
cuDNN and TensorFlow version, hands every valid table to the engine, and
registers :func:`save` to run at exit. The store itself is
:mod:`tf_ucudnn.database`.
"""

import atexit
import json
import warnings

import tensorflow as tf

from tf_ucudnn import _engine
from tf_ucudnn.database import (BenchmarkDatabase, check_record, database_path, engine_record,
                                stored_record)


def gpu_identity():
    """What stored benchmarks are valid for: ``(GPU name, cuDNN version, TF
    version)`` of the first visible GPU, or None without a GPU."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "unknown GPU")
    return name, _engine.cudnn_version(), tf.__version__


def _roomy_sizes(record):
    """``(every size, the sizes measured with room)`` of a stored record."""
    sizes = {row[0] for row in record["table"]}
    return sizes, sizes - set(record.get("pressured", []))


class _EngineLink:
    """Moves benchmark tables between the engine and the database of this process."""

    def __init__(self):
        self.db = None
        self.identity = None
        self.loaded = False
        self.saved_sizes = {}  # stored key (JSON) -> the sizes the database holds

    def load(self):
        """Seeds the engine with the database's tables for this GPU (once)."""
        if self.loaded:
            return
        self.loaded = True
        path = database_path()
        if path is None:
            return
        self.identity = gpu_identity()
        if self.identity is None:
            return
        self.db = BenchmarkDatabase(path)
        records = self.db.get(*self.identity)
        problems = list(self.db.malformed)
        for record in records:
            problem = check_record(record)
            if problem is None and not seed_engine(record):
                problem = "the engine refused it"
            if problem is None:
                self.saved_sizes[json.dumps(record["key"])] = _roomy_sizes(record)
            else:
                problems.append(problem)
        if problems:
            # One warning: the kernels of these records are benchmarked again.
            warnings.warn(f"tf_ucudnn: benchmark database {path}: skipped {len(problems)} "
                          f"malformed record(s) (first: {problems[0]}); planning continues "
                          f"and benchmarks those kernels again", RuntimeWarning, stacklevel=3)
        atexit.register(self.save)

    def save(self):
        """Stores the tables of this process that hold sizes the database lacks
        (or has only as measured under memory pressure)."""
        if self.db is None or self.identity is None:
            return
        records = []
        for entry in _engine.tables():
            record = stored_record(entry)
            key = json.dumps(record["key"])
            saved = self.saved_sizes.get(key, (set(), set()))
            sizes, roomy = _roomy_sizes(record)
            if sizes <= saved[0] and roomy <= saved[1]:
                continue
            records.append(record)
            self.saved_sizes[key] = (saved[0] | sizes, saved[1] | roomy)
        self.db.put(*self.identity, records)


_LINK = _EngineLink()


def seed_engine(record):
    """Hands one stored convolution's benchmark table (checked by
    :func:`check_record`) to the engine; returns whether the engine took it."""
    try:
        _engine.seed_kernel(engine_record(record))
    except ValueError:  # an enum out of range here, or the engine's refusal
        return False
    return True


def load():
    """Seeds the engine from the benchmark database (no-op without a GPU, or when off)."""
    _LINK.load()


def save():
    """Writes this process's new benchmark tables to the database now (also done at exit)."""
    _LINK.save()

"""Import TensorFlow once, quietly, with the settings realdist relies on.

``TF_CPP_MIN_LOG_LEVEL=2`` hides the C++ runtime's info lines; ``TF_USE_LEGACY_KERAS=1`` makes
``tf.keras`` the ``tf_keras`` package wherever Keras is used (Keras 3 breaks some distributed
cases; DESIGN.md). Both must be set before TensorFlow is imported; a user's own values win.
Some start-up lines (oneDNN, CUDA probing on a CPU-only build) are written before TF reads any
setting, so the import and the first device scan run with stderr captured, and what they wrote
is shown only if they fail.
"""

import contextlib
import os
import sys
import tempfile

from realdist.runtime.processes import TF_ENV_DEFAULTS

for _name, _value in TF_ENV_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


@contextlib.contextmanager
def captured_stderr():
    """Send file descriptor 2 to a temporary file; replay it if the block raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            capture.seek(0)
            sys.stderr.write(capture.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


with captured_stderr():
    import tensorflow as tf

    tf.config.list_physical_devices()

tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]

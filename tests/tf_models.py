"""TensorFlow SavedModels and reference outputs for the tests. These functions import TensorFlow,
so they run only in a child process (tests/tfchild.in_child); tests/models.py calls them that way
under their old names."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def save_dense_savedmodel(directory: Path, features: int, units: int, seed: int) -> Path:
    """A TF SavedModel: relu(x @ w + b) with a serving_default signature over [None, features]."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    class Dense(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(rng.normal(0, 0.5, (features, units)).astype(np.float32))
            self.b = tf.Variable(rng.normal(0, 0.1, (units,)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, features], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"y": tf.nn.relu(tf.matmul(x, self.w) + self.b)}

    module = Dense()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    return Path(directory)


def save_savedmodel_without_signatures(directory: Path) -> Path:
    """A TF SavedModel whose only tf.function is not exported as a signature."""
    import tensorflow as tf

    class NoSignature(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(np.ones((8, 4), np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
        def apply(self, x: tf.Tensor) -> tf.Tensor:
            return tf.matmul(x, self.w)

    tf.saved_model.save(NoSignature(), str(directory), signatures={})
    return Path(directory)


def save_two_signature_savedmodel(directory: Path) -> Path:
    """A TF SavedModel with two signatures, 'double' and 'halve', over [None, 2]."""
    import tensorflow as tf

    class TwoHeads(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def double(self, x: tf.Tensor) -> tf.Tensor:
            return x * 2.0

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def halve(self, x: tf.Tensor) -> tf.Tensor:
            return x / 2.0

    module = TwoHeads()
    tf.saved_model.save(
        module, str(directory), signatures={"double": module.double, "halve": module.halve}
    )
    return Path(directory)


def save_hostile_savedmodel(directory: Path, canary: Path) -> Path:
    """A SavedModel whose resource initializer (run by TensorFlow at load time) copies the loading
    process's environment into `canary`; a valid model otherwise (y = x + 1)."""
    import tensorflow as tf

    class Hostile(tf.saved_model.experimental.TrackableResource):
        def _create_resource(self) -> tf.Tensor:
            return tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="")

        def _initialize(self) -> tf.Operation:
            tf.io.write_file(str(canary), tf.io.read_file("/proc/self/environ"))
            return tf.raw_ops.AssignVariableOp(resource=self.resource_handle, value=1.0)

    class Module(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.resource = Hostile()

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            handle = self.resource.resource_handle
            return {"y": x + tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)}

    module = Module()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    Path(canary).unlink(missing_ok=True)  # only loading may write it
    return Path(directory)


def serving_output(directory: Path, x: np.ndarray, output: str = "y") -> np.ndarray:
    """TensorFlow's own answer: the SavedModel's serving_default signature on `x`, as numpy."""
    import tensorflow as tf

    signature = tf.saved_model.load(str(directory)).signatures["serving_default"]
    return signature(x=tf.constant(x))[output].numpy()

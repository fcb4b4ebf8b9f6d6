"""What a training step keeps for its backward pass: the forward tensors that
gradient ops read, by their static size (any machine; no GPU needed).

    python benchmarks/saved_activations.py [--models resnet50,resnet50v2,densenet121,unet-bn]
        [--size 64] [--batch 8] [--json PATH]

Per model (a ``tf-ucudnn bench`` model, ``size``² inputs, float32; loss: the
mean square of its output) and way of running it:

* ``stock``: the Keras model as it is;
* ``statistics``: ``tf_ucudnn.rewrite_model(fuse_batch_norm=True)`` with
  every convolution's ``input_prologue`` off (batch norm on the
  convolution's statistics);
* ``prologue``: the same with ``input_prologue`` on (each batch norm and
  ReLU before a tf_ucudnn convolution applied as its prologue).

The step is traced (``tf.function``, ``GradientTape``) and not run. A tensor
is kept when an op under the tape's gradient scope reads it and it comes
from the forward pass (variables, constants and shapes left out). The sum of
their sizes is a bound the GPU's peak does not follow exactly: XLA and TF's
executor schedule, fuse and free on their own. Prints MiB per way and the
producing op types above 1 MiB; writes the same as JSON with ``--json``.
"""

import argparse
import collections
import json

import keras
import numpy as np
import tensorflow as tf

from tf_ucudnn.bench.models import builders

_NOT_ACTIVATIONS = ("Const", "ReadVariableOp", "Placeholder", "Shape", "Identity")
_WAYS = ("stock", "statistics", "prologue")


def kept_tensors(model, batch, size):
    """``{tensor name: (bytes, producing op type)}`` of the forward tensors a
    traced training step of ``model`` reads in its backward pass."""
    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True)))
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(tf.TensorSpec((batch, size, size, 3), tf.float32)).graph
    kept = {}
    for op in graph.get_operations():
        if not op.name.startswith("gradient_tape/"):
            continue
        for tensor in op.inputs:
            producer = tensor.op
            if (producer.name.startswith("gradient_tape/")
                    or producer.type in _NOT_ACTIVATIONS or not tensor.shape.is_fully_defined()):
                continue
            kept[tensor.name] = (int(np.prod(tensor.shape)) * tensor.dtype.size, producer.type)
    return kept


def measure(name, way, batch, size):
    """One row: the model ``name`` run ``way`` (one of ``stock``,
    ``statistics``, ``prologue``); bytes kept, in total and per op type."""
    keras.utils.set_random_seed(0)
    model = builders.build_model(name, input_size=size)
    if way != "stock":
        model = builders.batch_norm_fused(model, 64 << 20, input_prologue=(way == "prologue"))
    kept = kept_tensors(model, batch, size)
    by_type = collections.Counter()
    for nbytes, op_type in kept.values():
        by_type[op_type] += nbytes
    return dict(model=name, way=way, batch=batch, size=size, tensors=len(kept),
                kept_bytes=sum(by_type.values()), by_op_type=dict(by_type.most_common()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,resnet50v2,densenet121,unet-bn",
                        help="comma list of tf-ucudnn bench models")
    parser.add_argument("--size", type=int, default=64,
                        help="input height and width (U-Nets: a multiple of 16)")
    parser.add_argument("--batch", type=int, default=8, help="mini-batch size N")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = [measure(name, way, args.batch, args.size)
            for name in args.models.split(",") for way in _WAYS]
    mib = 1 << 20
    print(f"{'model':12} {'way':11} {'kept MiB':>9} {'vs stock':>9}  largest by producing op (MiB)")
    stock = {}
    for row in rows:
        stock.setdefault(row["model"], row["kept_bytes"])
        top = ", ".join(f"{op} {b / mib:.1f}" for op, b in row["by_op_type"].items() if b >= mib)
        print(f"{row['model']:12} {row['way']:11} {row['kept_bytes'] / mib:9.1f} "
              f"{row['kept_bytes'] / stock[row['model']]:8.2f}x  {top}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), tensorflow=tf.__version__, rows=rows), f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

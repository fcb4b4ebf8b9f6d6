"""Demo: train the same small CNN with tf_ucudnn and with stock Keras, side by side.

Run as ``tf-ucudnn demo`` (``python -m tf_ucudnn demo``, ``make run``). Both
models are built with the same architecture and start from the same weights;
the only difference is the convolution layer (``tf_ucudnn.layers.Conv2D`` vs
``keras.layers.Conv2D``).
Both get the same workspace limit: tf_ucudnn through ``workspace_limit``, stock
TensorFlow through ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` (set before the first
convolution runs). The pair is trained twice: first with ``jit_compile=False``,
where that limit holds for both, then (unless ``--no-xla``) again from the same
initial weights with ``jit_compile=True``. Under XLA on a GPU tf_ucudnn's
convolutions are XLA custom calls that run the micro-batched plans within
``workspace_limit``, while stock XLA picks its own cuDNN algorithms, which
``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` does not limit; on the CPU both lower to
XLA's own convolution.

The data is the digits that scikit-learn bundles (1797 8x8 images of pixel
values 0..16, from the UCI ML hand-written digits data set, Alpaydin & Kaynak
1998, CC BY 4.0), shipped with tf_ucudnn as ``data/digits.npz`` so that no
download and no scikit-learn are needed; they are upsampled so that the
convolutions dominate the step time.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from tf_ucudnn.cli_args import byte_count, positive_int

DEFAULT_WORKSPACE_LIMIT = "64MiB"
DIGITS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")
TEST_FRACTION = 0.2


def _filter_list(text):
    try:
        filters = tuple(int(v) for v in text.split(","))
    except ValueError:
        filters = ()
    if len(filters) != 3 or min(filters) <= 0:
        raise argparse.ArgumentTypeError(f"expected three positive channel counts like 64,128,256, "
                                         f"got {text!r}")
    return filters


def parse_args(argv=None):
    """Parses the demo's command line.

    Args:
      argv: list of arguments without the program name; None uses sys.argv.

    Returns:
      An argparse.Namespace.
    """
    parser = argparse.ArgumentParser(
        prog="tf-ucudnn demo",
        description="Train one small CNN on the 8x8 digits (shipped with tf_ucudnn) twice, with "
                    "tf_ucudnn.layers.Conv2D and with keras.layers.Conv2D, from the same "
                    "initial weights and under the same cuDNN workspace limit; compare "
                    "losses, accuracy and time per step; first without XLA "
                    "(jit_compile=False), then with it (jit_compile=True).")
    parser.add_argument("--epochs", type=positive_int, default=3, help="epochs (default 3)")
    parser.add_argument("--batch-size", type=positive_int, default=None,
                        help="mini-batch size (default 128 on a GPU, 64 on the CPU)")
    parser.add_argument("--filters", type=_filter_list, default=None,
                        help="channels of the three convolutions, e.g. 64,128,256 (default "
                             "64,128,256 on a GPU, where the workspace limit matters; 16,32,64 "
                             "on the CPU, to keep the run short)")
    parser.add_argument("--workspace-limit", type=byte_count, default=DEFAULT_WORKSPACE_LIMIT,
                        help="cuDNN workspace limit per convolution kernel, for both models: "
                             "bytes or e.g. 64MiB, 1GiB (default 64MiB). Stock TF gets it as "
                             "TF_CUDNN_WORKSPACE_LIMIT_IN_MB (whole MiB).")
    parser.add_argument("--image-size", type=positive_int, default=64,
                        help="side the 8x8 digits are upsampled to (default 64)")
    parser.add_argument("--policy", choices=("undivided", "powerOfTwo", "all"), default=None,
                        help="tf_ucudnn batch-size policy (default: UCUDNN_BATCH_SIZE_POLICY, "
                             "else powerOfTwo)")
    parser.add_argument("--data-format", choices=("auto", "channels_last", "channels_first"),
                        default="channels_last",
                        help="layout of both models (default channels_last, Keras' default; "
                             "stock TF's CPU convolution supports only channels_last); auto: "
                             "channels_first on a GPU, channels_last on the CPU")
    parser.add_argument("--tf32", choices=("on", "off"), default="on",
                        help="TensorFloat-32 math on Ampere+ GPUs, for both models (default on, "
                             "TF's default); off makes the loss comparison tighter")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance for 'the losses match' (default 0.05 with TF32 "
                             "on, where each algorithm rounds its products to 10 mantissa bits "
                             "differently and training drifts apart slowly; 0.01 with TF32 off)")
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=True,
                        help="after the run without XLA, train both models again with "
                             "jit_compile=True (default; --no-xla skips it). On a GPU tf_ucudnn's "
                             "convolutions are then XLA custom calls within the workspace limit, "
                             "and stock XLA's are not limited; on the CPU both are XLA's own "
                             "convolution")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights, split and order")
    parser.add_argument("--json", metavar="PATH", help="also write a JSON summary to PATH")
    args = parser.parse_args(argv)
    if args.image_size < 8:
        parser.error(f"--image-size must be at least 8 (three 2x2 poolings), got {args.image_size}")
    if args.batch_size is not None and args.batch_size > 1437:
        parser.error(f"--batch-size {args.batch_size} exceeds the 1437 training samples")
    return args


def data_format_for(choice, on_gpu):
    """``--data-format`` as a Keras ``data_format``: ``"auto"`` is
    ``"channels_first"`` on a GPU and ``"channels_last"`` on the CPU (stock
    TF's CPU convolution takes only channels_last); the others as given."""
    if choice == "auto":
        return "channels_first" if on_gpu else "channels_last"
    return choice


def device_description(tf):
    """A one-line name of the device the models run on: the GPU's name, else the CPU's.

    Args:
      tf: the tensorflow module.

    Returns:
      A (kind, name) pair: kind is "GPU" or "CPU".
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        name = details.get("device_name", gpus[0].name)
        more = f" (+{len(gpus) - 1} more, unused)" if len(gpus) > 1 else ""
        return "GPU", name + more
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "CPU", f"{name}, {os.cpu_count()} cores"


def load_digits():
    """The digits shipped with tf_ucudnn: scikit-learn's ``load_digits()`` data.

    Returns:
      ``(images, labels)``: uint8 arrays ``[1797, 8, 8]`` of pixel values 0..16
      and ``[1797]`` of digits 0..9.
    """
    with np.load(DIGITS_PATH) as data:
        return data["images"], data["labels"]


def stratified_split(labels, test_fraction, seed):
    """A shuffled split of sample indices with each class in both parts in
    proportion to its size.

    The test part has ``ceil(test_fraction * n)`` samples; each class gives it
    its share rounded down, and the samples left over go to the classes with
    the largest remainders (the first classes on ties).

    Args:
      labels: 1-D int array of class labels.
      test_fraction: in (0, 1).
      seed: seed of ``numpy.random.default_rng``.

    Returns:
      ``(train_indices, test_indices)``: int arrays, disjoint, together every
      index once, each in shuffled order.
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    n_test = int(np.ceil(test_fraction * len(labels)))
    shares = counts * n_test / len(labels)
    per_class = np.floor(shares).astype(int)
    for i in np.argsort(-(shares - per_class), kind="stable")[:n_test - per_class.sum()]:
        per_class[i] += 1
    train, test = [], []
    for cls, k in zip(classes, per_class):
        members = rng.permutation(np.flatnonzero(labels == cls))
        test.append(members[:k])
        train.append(members[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def load_digits_images(image_size, data_format, seed):
    """The digits as float32 images in [0, 1], split 80/20, stratified.

    Args:
      image_size: side the 8x8 images are resized (bilinear) to.
      data_format: "channels_last" (``[n, size, size, 1]``) or "channels_first"
        (``[n, 1, size, size]``).
      seed: seed of the split (:func:`stratified_split`).

    Returns:
      ``(x_train, y_train, x_test, y_test)`` as numpy arrays; labels int32 in
      0..9; 1437 training and 360 test samples.
    """
    import tensorflow as tf

    digits, labels = load_digits()
    images = (digits.astype(np.float32) / 16.0)[..., None]  # [n, 8, 8, 1]
    images = tf.image.resize(images, (image_size, image_size), method="bilinear").numpy()
    if data_format == "channels_first":
        images = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    labels = labels.astype(np.int32)
    train, test = stratified_split(labels, TEST_FRACTION, seed)
    return images[train], labels[train], images[test], labels[test]


def build_model(conv_layer, image_size, data_format, filters=(16, 32, 64), **conv_kwargs):
    """The demo CNN: three 3x3 convolutions (`filters` channels), each max-pooled, then Dense(10).

    Args:
      conv_layer: the Conv2D class, ``keras.layers.Conv2D`` or
        ``tf_ucudnn.layers.Conv2D``.
      image_size: input height and width.
      data_format: "channels_last" or "channels_first".
      filters: channels of the three convolutions.
      **conv_kwargs: extra arguments for every convolution (tf_ucudnn's knobs).

    Returns:
      An uncompiled ``keras.Model`` mapping images to 10 logits.
    """
    import keras

    shape = (image_size, image_size, 1) if data_format == "channels_last" else (1, image_size,
                                                                               image_size)
    inputs = keras.Input(shape=shape)
    x = inputs
    for i, channels in enumerate(filters):
        x = conv_layer(channels, 3, padding="same", activation="relu", data_format=data_format,
                       name=f"conv{i + 1}", **conv_kwargs)(x)
        x = keras.layers.MaxPooling2D(2, data_format=data_format, name=f"pool{i + 1}")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inputs, outputs, name=conv_layer.__module__.split(".")[0] + "_cnn")


def _compile(model, jit_compile):
    import keras

    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=jit_compile)


def losses_match(a, b, rtol):
    """Whether two loss sequences agree: ``|a - b| <= rtol * max(|a|, |b|, 0.05)`` elementwise.

    The floor of 0.05 keeps near-zero losses from demanding impossible
    relative agreement.

    Args:
      a, b: sequences of floats of equal length.
      rtol: relative tolerance.

    Returns:
      ``(match, max_rel_diff)``.
    """
    worst = 0.0
    for x, y in zip(a, b):
        worst = max(worst, abs(x - y) / max(abs(x), abs(y), 0.05))
    return worst <= rtol, worst


_HEADER = ("model", "epoch", "train loss", "train acc", "test loss", "test acc", "ms/step")
_WIDTHS = (9, 6, 10, 9, 9, 8, 10)


def _print_row(cells, note=""):
    print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                    for i, (c, w) in enumerate(zip(cells, _WIDTHS))) + note)


def _print_header():
    print()
    _print_row(_HEADER)
    _print_row(["-" * w for w in _WIDTHS])


def _train_epoch(model, x, y, order, batch_size, x_test, y_test):
    """One epoch of ``model.fit`` over ``x[order]`` (timed), then ``evaluate`` on the test split."""
    import tensorflow as tf

    steps = len(order) // batch_size
    dataset = tf.data.Dataset.from_tensor_slices((x[order], y[order]))
    dataset = dataset.batch(batch_size, drop_remainder=True).prefetch(2)
    start = time.perf_counter()
    fit = model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start  # fit hands back host floats: its steps have finished
    test_loss, test_acc = model.evaluate(x_test, y_test, batch_size=batch_size, verbose=0)
    return dict(loss=float(fit.history["loss"][-1]), accuracy=float(fit.history["accuracy"][-1]),
                test_loss=float(test_loss), test_accuracy=float(test_acc),
                ms_per_step=1e3 * seconds / steps)


def _describe_setup(args, tf, keras, tf_ucudnn, kind, device_name, data_format, limit_mib,
                    previous_env):
    from tf_ucudnn.units import format_bytes

    on_gpu = kind == "GPU"
    print(f"tf_ucudnn {tf_ucudnn.__version__} demo: TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}")
    print(f"device: {kind} {device_name}"
          + (f", cuDNN {tf_ucudnn.cudnn_version()}" if on_gpu else ""))
    print(f"workspace limit: {format_bytes(args.workspace_limit)} per convolution kernel "
          f"(tf_ucudnn workspace_limit={args.workspace_limit}; stock TF "
          f"TF_CUDNN_WORKSPACE_LIMIT_IN_MB={limit_mib})")
    if previous_env is not None and previous_env != str(limit_mib):
        print(f"  note: replaced TF_CUDNN_WORKSPACE_LIMIT_IN_MB={previous_env} from the "
              f"environment")
    print(f"both models: {data_format}, TF32 {args.tf32}, Adam(1e-3), "
          f"batch {args.batch_size}, convolutions {'-'.join(map(str, args.filters))} channels, "
          f"policy {args.policy or 'default'}, same initial weights; trained without XLA "
          f"(jit_compile=False)" + (", then with XLA (jit_compile=True)" if args.xla else ""))
    if not on_gpu:
        print("no GPU: both models run on the CPU (tf_ucudnn's CPU kernel is im2col + GEMM; "
              "under XLA both are XLA's own convolution); times show the mechanics, not "
              "μ-cuDNN's speedup")


def _train_pair(models, args, data, on_gpu, title, show_plans):
    """Trains the models side by side, the same batches in the same order, and
    prints a row per model and epoch.

    Args:
      models: ``{"stock": model, "tf_ucudnn": model}``, compiled.
      args: the demo's arguments (epochs, batch size, seed, rtol).
      data: ``(x_train, y_train, x_test, y_test)``.
      on_gpu: whether they run on a GPU (speedups are printed there only).
      title: the line above the table.
      show_plans: whether to print ``tf_ucudnn.plans()`` after epoch 1.

    Returns:
      A dict: ``history`` (per epoch: each model's losses, accuracies and
      ms/step, and on a GPU ``speedup``), ``mean_ms_per_step``,
      ``mean_over``, ``speedup`` (stock ms / tf_ucudnn ms; None on the CPU),
      ``ratio`` (the same on any device), ``losses_match``,
      ``max_relative_loss_difference`` and ``plans`` (the records printed,
      else empty).
    """
    import tf_ucudnn

    x_train, y_train, x_test, y_test = data
    steps = len(x_train) // args.batch_size
    rng = np.random.default_rng(args.seed)
    history, plan_records = [], []
    print(f"\n{title}")
    _print_header()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))[:steps * args.batch_size]
        row = {"epoch": epoch}
        for label, model in models.items():  # the same batches in the same order for both
            row[label] = r = _train_epoch(model, x_train, y_train, order, args.batch_size,
                                          x_test, y_test)
            note = ""
            if epoch == 1:
                note = ("  (incl. tracing"
                        + (" + XLA compilation" if getattr(model, "jit_compile", False) else "")
                        + (" + planning" if label == "tf_ucudnn" and on_gpu else "") + ")")
            _print_row((label, epoch, f"{r['loss']:.4f}", f"{r['accuracy']:.3f}",
                        f"{r['test_loss']:.4f}", f"{r['test_accuracy']:.3f}",
                        f"{r['ms_per_step']:.1f}"), note)
        if on_gpu:
            row["speedup"] = row["stock"]["ms_per_step"] / row["tf_ucudnn"]["ms_per_step"]
            print(f"{'':17}speedup stock/tf_ucudnn: {row['speedup']:.2f}x")
        history.append(row)
        if epoch == 1 and show_plans:
            table = tf_ucudnn.plans()
            plan_records = list(table)
            print(f"\ntf_ucudnn plans after epoch 1 (one per convolution kernel and batch size; "
                  f"{'benchmarked' if on_gpu else 'CPU: one algorithm, no workspace'}):")
            print(table)
            if epoch < args.epochs:
                _print_header()

    timed = history[1:] if len(history) > 1 else history
    mean_ms = {label: float(np.mean([row[label]["ms_per_step"] for row in timed]))
               for label in models}
    if len(history) > 2:
        span = f"epochs 2-{args.epochs}"
    else:
        span = "epoch 2" if len(history) == 2 else "epoch 1 only, incl. tracing and planning"
    print(f"mean time per step ({span}): stock {mean_ms['stock']:.1f} ms, "
          f"tf_ucudnn {mean_ms['tf_ucudnn']:.1f} ms")
    ratio = mean_ms["stock"] / mean_ms["tf_ucudnn"]
    stock_losses = [row["stock"][k] for row in history for k in ("loss", "test_loss")]
    our_losses = [row["tf_ucudnn"][k] for row in history for k in ("loss", "test_loss")]
    match, worst = losses_match(stock_losses, our_losses, args.rtol)
    return dict(history=history, mean_ms_per_step=mean_ms, mean_over=span,
                speedup=ratio if on_gpu else None, ratio=ratio, losses_match=match,
                max_relative_loss_difference=worst, plans=plan_records)


def _print_outcome(run, args, on_gpu, what):
    """The speedup (GPU) or ratio (CPU) and the loss comparison of one :func:`_train_pair`."""
    from tf_ucudnn.units import format_bytes

    if on_gpu:
        print(f"speedup {what} (stock / tf_ucudnn time per step) at a "
              f"{format_bytes(args.workspace_limit)} workspace limit: {run['ratio']:.2f}x")
    else:
        print(f"ratio stock / tf_ucudnn {what} on the CPU: {run['ratio']:.2f}x (not a μ-cuDNN "
              f"figure)")
    print(f"losses {what} {'MATCH' if run['losses_match'] else 'DIFFER'}: max relative difference "
          f"over {len(run['history'])} epoch(s), train and test, "
          f"{run['max_relative_loss_difference']:.2e} (tolerance {args.rtol:g}; the math is the "
          f"same, only the convolution algorithms and their rounding differ)")


def main(argv=None):
    """Runs the demo.

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      The exit status: 0, or 1 when the two models' losses differ beyond
      ``--rtol`` (without XLA, or with it).
    """
    args = parse_args(argv)
    limit_mib = max(1, args.workspace_limit >> 20)
    # Stock TF reads this once, at its first cuDNN convolution (a function-local
    # static), so setting it here, before any convolution has run, takes effect.
    previous_env = os.environ.get("TF_CUDNN_WORKSPACE_LIMIT_IN_MB")
    os.environ["TF_CUDNN_WORKSPACE_LIMIT_IN_MB"] = str(limit_mib)

    import keras
    import tensorflow as tf

    # The op library loads before TensorFlow runs its first op: TF registers
    # the XLA kernels of the ops it knows then, and tf_ucudnn's would be missing
    # under jit_compile=True (the `tf-ucudnn` command binds the API lazily).
    import tf_ucudnn
    import tf_ucudnn.layers  # noqa: F401

    tf.config.experimental.enable_tensor_float_32_execution(args.tf32 == "on")
    kind, device_name = device_description(tf)
    on_gpu = kind == "GPU"
    data_format = data_format_for(args.data_format, on_gpu)
    if args.batch_size is None:
        args.batch_size = 128 if on_gpu else 64
    if args.filters is None:
        args.filters = (64, 128, 256) if on_gpu else (16, 32, 64)
    if args.rtol is None:
        args.rtol = 5e-2 if args.tf32 == "on" else 1e-2
    _describe_setup(args, tf, keras, tf_ucudnn, kind, device_name, data_format, limit_mib,
                    previous_env)

    data = load_digits_images(args.image_size, data_format, args.seed)
    x_train, x_test = data[0], data[2]
    steps = len(x_train) // args.batch_size  # drop the remainder: every step has the full batch
    print(f"data: digits (scikit-learn's) upsampled 8x8 -> {args.image_size}x{args.image_size}, "
          f"{len(x_train)} train / {len(x_test)} test, {steps} steps of {args.batch_size} per "
          f"epoch (last {len(x_train) - steps * args.batch_size} dropped); train loss/acc are "
          f"Keras' running means over the epoch, test after it")

    def build_pair(jit_compile, initial_weights=None):
        keras.utils.set_random_seed(args.seed)
        stock = build_model(keras.layers.Conv2D, args.image_size, data_format, args.filters)
        ours = build_model(tf_ucudnn.layers.Conv2D, args.image_size, data_format, args.filters,
                           workspace_limit=args.workspace_limit, batch_size_policy=args.policy)
        if initial_weights is not None:
            stock.set_weights(initial_weights)
        ours.set_weights(stock.get_weights())
        for model in (stock, ours):
            _compile(model, jit_compile)
        return {"stock": stock, "tf_ucudnn": ours}

    models = build_pair(jit_compile=False)
    initial_weights = models["stock"].get_weights()
    run = _train_pair(models, args, data, on_gpu, "without XLA (jit_compile=False): "
                      "the same workspace limit for both", show_plans=True)
    _print_outcome(run, args, on_gpu, "without XLA")

    xla = None
    if args.xla:
        title = ("with XLA (jit_compile=True): tf_ucudnn's convolutions are XLA custom calls "
                 "within its workspace limit; stock XLA's are not limited" if on_gpu else
                 "with XLA (jit_compile=True): on the CPU both models' convolutions are XLA's own")
        xla = _train_pair(build_pair(jit_compile=True, initial_weights=initial_weights), args,
                          data, on_gpu, title, show_plans=False)
        del xla["plans"]
        _print_outcome(xla, args, on_gpu, "with XLA")

    if args.json:
        summary = dict(
            device=dict(kind=kind, name=device_name,
                        cudnn=tf_ucudnn.cudnn_version() if on_gpu else None),
            tensorflow=tf.__version__, keras=keras.__version__, tf_ucudnn=tf_ucudnn.__version__,
            jit_compile=False, data_format=data_format, tf32=args.tf32 == "on",
            workspace_limit=args.workspace_limit, tf_cudnn_workspace_limit_in_mb=limit_mib,
            policy=args.policy, epochs=args.epochs, batch_size=args.batch_size,
            image_size=args.image_size, steps_per_epoch=steps, seed=args.seed,
            optimizer="Adam(1e-3)", history=run["history"],
            mean_ms_per_step=run["mean_ms_per_step"], mean_over=run["mean_over"],
            speedup=run["speedup"], losses_match=run["losses_match"],
            max_relative_loss_difference=run["max_relative_loss_difference"], rtol=args.rtol,
            plans=run["plans"], xla=xla)
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
        print(f"wrote {args.json}")
    return 0 if run["losses_match"] and (xla is None or xla["losses_match"]) else 1


if __name__ == "__main__":
    sys.exit(main())

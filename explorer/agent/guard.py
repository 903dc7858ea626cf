"""The gradient-path guard: does every variable get a usable gradient from a loss?

A novelty score computed from screenshots depends on the policy only through
the game, so ``tape.gradient`` returns ``None`` for every policy weight and
Keras stops with "No gradients provided for any variable". The same silence
comes from a loss through ``argmax``/``round``/an integer cast, from a tensor
that went through numpy, or from a model rebuilt inside the step (its fresh
variables are not the ones being trained). :func:`check_gradients` runs one
tape over a loss and names each broken variable with the likely cause;
:class:`GradientPathError` is what a learner raises before it starts on a
broken path.

Example::

    report = check_gradients(lambda: actor_loss(batch), policy.trainable_variables)
    report.raise_if_broken()   # GradientPathError naming variables and cause
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import tensorflow as tf

# Ops that pass values but no gradient (or a zero one) in TensorFlow.
_CUTTING_OPS = {
    "ArgMax": "argmax", "ArgMin": "argmin", "Round": "round", "Floor": "floor", "Ceil": "ceil",
    "Sign": "sign", "StopGradient": "stop_gradient", "Equal": "a comparison", "Greater": "a comparison",
    "Less": "a comparison", "GreaterEqual": "a comparison", "LessEqual": "a comparison", "Rint": "round",
}
_NUMPY_OPS = {"PyFunc", "EagerPyFunc", "PyFuncStateless"}
_INT_TYPES = {tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool}

CAUSE_NOT_READ = ("the loss does not depend on this variable: the model output never reaches the loss "
                  "(e.g. a novelty computed from frames only; the game is a black box, so close the path "
                  "with a learned, action-conditioned critic Q(obs, a) and maximise Q(obs, pi(obs)))")
CAUSE_REBUILT = ("a model was rebuilt inside the step: the loss reads freshly created variables, "
                 "not the ones being trained; build the model once, outside the step")
CAUSE_NUMPY = ("a tensor went through numpy (.numpy(), np.* or a py_function) between the variable and the "
               "loss; numpy values carry no gradient; keep the computation in TensorFlow")
CAUSE_ZERO = ("the gradient is exactly zero: a piecewise-constant op (round, floor, sign), a dead ReLU, "
              "a saturated tanh/sigmoid, or an input of zeros")
CAUSE_NONFINITE = "the gradient is NaN or Inf: log/sqrt/division at zero, or exploding values"


class GradientPathError(RuntimeError):
    """A loss gives no usable gradient to some variables; the message says which and why."""


@dataclass
class Broken:
    """One variable without a usable gradient."""

    name: str
    problem: str  # "none", "zero" or "nonfinite"
    cause: str


@dataclass
class GuardReport:
    """What :func:`check_gradients` found."""

    loss: float
    checked: int
    broken: list[Broken] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.broken

    def __str__(self) -> str:
        if self.ok:
            return f"gradient path ok: {self.checked} variables get finite non-zero gradients (loss {self.loss:.4g})"
        by_cause: dict[str, list[str]] = {}
        for b in self.broken:
            by_cause.setdefault(f"{b.problem}: {b.cause}", []).append(b.name)
        lines = [f"gradient path broken: {len(self.broken)} of {self.checked} variables get no usable gradient"]
        for cause, names in by_cause.items():
            shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
            lines.append(f"  [{shown}]\n    likely cause -> {cause}")
        return "\n".join(lines)

    def raise_if_broken(self) -> None:
        if not self.ok:
            raise GradientPathError(str(self))


def check_gradients(loss_fn: Callable[[], tf.Tensor], variables: Sequence[tf.Variable],
                    names: Sequence[str] | None = None) -> GuardReport:
    """Run ``loss_fn`` once under a tape and report variables without a usable gradient.

    Args:
      loss_fn: no-argument callable returning a scalar loss, run eagerly.
      variables: the variables that should be trained by this loss.
      names: display names (defaults to the variables' paths/names).

    Returns:
      A :class:`GuardReport`; ``report.ok`` is True when every variable gets a
      finite gradient with at least one non-zero entry.
    """
    variables = list(variables)
    names = list(names) if names is not None else [getattr(v, "path", None) or v.name for v in variables]
    created: list[tf.Variable] = []

    def record(next_creator, **kwargs):
        v = next_creator(**kwargs)
        created.append(v)
        return v

    numpy_error = False
    with tf.GradientTape(persistent=False, watch_accessed_variables=True) as tape, \
            tf.variable_creator_scope(record):
        try:
            loss = loss_fn()
        except (NotImplementedError, AttributeError, TypeError) as err:
            if "numpy" not in str(err).lower():
                raise
            numpy_error = True
            loss = tf.constant(0.0)
    loss = tf.convert_to_tensor(loss)
    if loss.shape.rank:
        raise ValueError(f"loss_fn must return a scalar, got shape {loss.shape}")
    read = {id(v) for v in tape.watched_variables()} if not numpy_error else set()
    grads = tape.gradient(loss, variables) if not numpy_error else [None] * len(variables)
    report = GuardReport(loss=float(loss), checked=len(variables))
    none_cause: str | None = None
    for v, name, g in zip(variables, names, grads, strict=True):
        if g is None:
            if none_cause is None:
                none_cause = CAUSE_NUMPY if numpy_error else _why_none(loss_fn, created, read, v)
            cause = CAUSE_NUMPY if numpy_error else (none_cause if id(_tf_variable(v)) in read else
                                                     (CAUSE_REBUILT if created else CAUSE_NOT_READ))
            report.broken.append(Broken(name, "none", cause))
            continue
        g = tf.convert_to_tensor(g)
        if not bool(tf.reduce_all(tf.math.is_finite(g))):
            report.broken.append(Broken(name, "nonfinite", CAUSE_NONFINITE))
        elif not bool(tf.reduce_any(g != 0)):
            report.broken.append(Broken(name, "zero", CAUSE_ZERO))
    return report


def _tf_variable(v):
    """The ``tf.Variable`` behind a Keras 3 variable (or ``v`` itself)."""
    inner = getattr(v, "value", None)
    return inner if isinstance(inner, tf.Variable) else v


def _why_none(loss_fn: Callable[[], tf.Tensor], created: list[tf.Variable], read: set[int], var: tf.Variable) -> str:
    """Name the likely cause when a variable is read by the loss but gets no gradient."""
    if id(_tf_variable(var)) not in read:
        return CAUSE_REBUILT if created else CAUSE_NOT_READ
    ops = _graph_ops(loss_fn)
    if ops is None:
        return CAUSE_NUMPY
    if ops & _NUMPY_OPS:
        return CAUSE_NUMPY
    if "ReadVariableOp" not in ops:
        return CAUSE_NOT_READ
    cutting = sorted({_CUTTING_OPS[o] for o in ops if o in _CUTTING_OPS} | ({"a cast to an integer type"} if "CastInt" in ops else set()))
    if len(cutting) > 1 and "stop_gradient" in cutting:
        cutting.remove("stop_gradient")  # losses use it on purpose (targets); name the unusual op first
    if cutting:
        return f"a non-differentiable op cuts the path: {', '.join(cutting)}; act on the continuous output instead"
    return "the path is cut between the variable and the loss (stop_gradient, integer cast or an op without a gradient)"


def _graph_ops(loss_fn: Callable[[], tf.Tensor]) -> set[str] | None:
    """Op types in a graph trace of ``loss_fn``; None when tracing fails on a numpy conversion."""
    try:
        graph = tf.function(loss_fn).get_concrete_function().graph
    except (NotImplementedError, AttributeError, TypeError, ValueError) as err:
        if "numpy" in str(err).lower() or "symbolic" in str(err).lower():
            return None
        return set()
    ops: set[str] = set()
    # Walk back from the loss: only ops the loss depends on count.
    todo = [t.op for t in graph.outputs]
    seen: set[int] = set()
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        ops.add(op.type)
        if op.type == "Cast" and op.get_attr("DstT") in _INT_TYPES:
            ops.add("CastInt")
        todo.extend(t.op for t in op.inputs)
    return ops
